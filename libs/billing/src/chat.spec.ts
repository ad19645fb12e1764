import { loadCatalog, ProviderStats } from '@svc/catalog';
import { fold } from '@svc/eventstore';
import { type Caller, DEFAULT_KEY_SETTINGS } from '@svc/identity';
import { embeddingsRequest } from '@svc/interfaces';
import { accountDecider, type AccountEvent } from '@svc/ledger';
import { A, credited, opened } from '@svc/ledger/testing/account-fixtures';
import { MeteredCalls, OwnProviders, type StreamProgress, type StreamSink } from '@svc/metering';
import { nanoToUsd } from '@svc/platform';
import { createProvider, type Provider, startSimulator, type Simulator } from '@svc/providers';
import { ChatCompletions } from './chat';
import type { ChatRequest } from './chat-request';
import { Embeddings } from './embeddings';
import { Messages } from './messages';

/** A client's body in memory. */
class MemorySink implements StreamSink {
  readonly frames: string[] = [];
  last: string | null = null;
  write(frames: string): boolean {
    this.frames.push(frames);
    return true;
  }
  async drained(): Promise<boolean> {
    return true;
  }
  finish(frames: string): void {
    this.last = frames;
  }
  abandonAfter(): void {}
}

const clock = { now: () => new Date() };
const catalog = loadCatalog();
let sim: Simulator;
let providers: Map<string, Provider>;

beforeAll(async () => {
  sim = await startSimulator();
  providers = new Map();
  for (const model of catalog.models) {
    for (const { provider } of model.providers) {
      const baseUrl = provider.baseUrl === 'simulator' ? sim.url : provider.baseUrl;
      providers.set(provider.name, createProvider(provider.adapter, { baseUrl, apiKey: provider.apiKey, timeoutMs: 10_000, dialect: provider.dialect }));
    }
  }
});
afterAll(() => sim.close());

const caller: Caller = {
  ...DEFAULT_KEY_SETTINGS,
  keyId: 'k1',
  accountId: A,
  workspaceId: A,
  orgId: null,
  createdBy: A,
  secretHint: 'svc_test_...',
  createdAt: '2026-11-01T00:00:00.000Z',
  updatedAt: '2026-11-01T00:00:00.000Z',
  revokedAt: null,
  sealedProviderKeys: new Map(),
  promptLogDays: null,
  presets: new Map(),
  guardrails: [],
};

/**
 * The use cases over a real pipeline: the simulated upstream over HTTP, and the account's own
 * decider folding the log in memory in place of the event store.
 */
function setUp() {
  const log: AccountEvent[] = [opened, credited(1_000_000_000_000n)];
  const calls = new MeteredCalls({
    clock,
    catalog,
    providers,
    own: new OwnProviders({ encryptionKey: null, simulatorUrl: sim.url, timeoutMs: 10_000 }),
    byokFeePercent: 5,
    upstreamTimeoutMs: 10_000,
    ledger: async (_accountId, command) => {
      const events = accountDecider.decide(command, fold(accountDecider, log), clock.now());
      log.push(...events);
      return {
        events,
        state: fold(accountDecider, log),
        appended: events.length > 0 ? { nextRevision: BigInt(log.length - 1), position: String(log.length) } : null,
      };
    },
    tokenLimits: { consumePrompt: async () => ({}), recordOutput: async () => undefined },
    leaseId: () => undefined,
    warn: () => undefined,
  });
  const progress = new Map<string, StreamProgress>();
  const recorded: StreamProgress[] = [];
  const providerStats = new ProviderStats();
  const chat = new ChatCompletions({
    calls,
    catalog,
    clock,
    providerStats,
    encryptionKey: () => null,
    streamStallMs: 5_000,
    progress: {
      record: async (p) => {
        recorded.push(p);
        progress.set(p.holdId, p);
      },
      forget: async (holdId) => void progress.delete(holdId),
    },
    progressIntervalMs: 20,
    streamError: (failure) => ({ error: { message: (failure as Error).message } }),
    log: { warn: () => undefined, error: () => undefined },
  });
  const of = <T extends AccountEvent['type']>(type: T) => log.filter((e): e is Extract<AccountEvent, { type: T }> => e.type === type);
  return { calls, chat, log, of, progress, recorded, providerStats };
}

const ask = (content: string, over: Partial<ChatRequest> = {}): ChatRequest => ({ model: 'sim/echo', messages: [{ role: 'user', content }], ...over });
const events = (sink: MemorySink) =>
  [...sink.frames, sink.last ?? '']
    .join('')
    .split('\n\n')
    .filter((f) => f.startsWith('data: '))
    .map((f) => f.slice('data: '.length));

describe('ChatCompletions', () => {
  it('holds for the models its plan routed, in the plan order, and charges what the answering provider reported', async () => {
    const { chat, of } = setUp();
    const prepared = chat.prepare(caller, ask('Hello', { model: 'sim/echo:floor', models: ['sim/small-8k'], max_tokens: 50 }));
    expect(prepared.plan.models.map((m) => `${m.model.id}:${m.routes.map((r) => r.provider.name).join('+')}`)).toEqual([
      'sim/echo:sim+sim-backup',
      'sim/small-8k:sim',
    ]);
    const answered = await chat.answer(caller, prepared, {});
    expect(answered.metered.reservation.targets.map((t) => `${t.model}:${t.provider}`)).toEqual(['sim/echo:sim', 'sim/echo:sim-backup', 'sim/small-8k:sim']);
    expect(of('HoldPlaced')).toHaveLength(1);
    expect(of('UsageCharged')).toHaveLength(0);
    const { generationId, body } = await chat.create(caller, prepared, {});
    const [charge] = of('UsageCharged');
    expect(charge.data.hold_id).toBe(generationId);
    expect(body.usage.cost).toBe(nanoToUsd(BigInt(charge.data.amount_nano)));
    expect(charge.data.usage).toEqual({ input: body.usage.prompt_tokens, output: body.usage.completion_tokens });
  });

  it('streams into the sink under the generation id, then the usage chunk with the cost it charged, then [DONE]', async () => {
    const { chat, of, providerStats } = setUp();
    const sink = new MemorySink();
    const prepared = chat.prepare(caller, ask('Stream this', { stream: true, stream_options: { include_usage: true } }));
    const { generationId, finished } = await chat.stream(caller, prepared, {}, sink);
    await expect(finished).resolves.toBe(true);
    const sent = events(sink);
    expect(sent[sent.length - 1]).toBe('[DONE]');
    const usage = JSON.parse(sent[sent.length - 2]).usage;
    expect(sent.slice(0, -2).every((e) => JSON.parse(e).id === generationId)).toBe(true);
    const [charge] = of('UsageCharged');
    expect(usage.cost).toBe(nanoToUsd(BigInt(charge.data.amount_nano)));
    expect(charge.data.usage?.output).toBe(usage.completion_tokens);
    // A clean stream is a measure of its provider's speed.
    expect(providerStats.figures('sim/echo', 'sim')?.ttftMs).not.toBeNull();
  });

  it('bills a stream cut short for the text it delivered, records its progress meanwhile, and forgets it once settled', async () => {
    const { chat, of, progress, recorded } = setUp();
    const sink = new MemorySink();
    const prepared = chat.prepare(caller, ask('Tell me a long story\n#sim {"cut_after_chunks": 6, "chunk_delay_ms": 15}', { stream: true }));
    const { finished } = await chat.stream(caller, prepared, {}, sink);
    await expect(finished).resolves.toBe(false);
    expect(JSON.parse(events(sink).at(-1)!).error).toBeDefined();
    const [charge] = of('UsageCharged');
    expect(charge.data.usage?.output).toBeGreaterThan(0);
    expect(recorded.length).toBeGreaterThan(0);
    // Priced as the charge would be, for the hold reaper should the process die.
    expect(recorded.every((p) => p.holdId === charge.data.hold_id && p.amountNano <= BigInt(charge.data.amount_nano))).toBe(true);
    expect(progress.size).toBe(0);
  });

  it('releases the hold of a stream whose provider failed before its first output, and charges nothing', async () => {
    const { chat, of } = setUp();
    const prepared = chat.prepare(caller, ask('Hi\n#sim {"fail": 400}', { stream: true }));
    await expect(chat.stream(caller, prepared, {}, new MemorySink())).rejects.toBeDefined();
    expect(of('HoldReleased')).toHaveLength(1);
    expect(of('UsageCharged')).toHaveLength(0);
  });

  it('waits for running streams to settle before a shutdown', async () => {
    const { chat, of } = setUp();
    const prepared = chat.prepare(caller, ask('Slowly\n#sim {"chunk_delay_ms": 20}', { stream: true }));
    await chat.stream(caller, prepared, {}, new MemorySink());
    expect(of('UsageCharged')).toHaveLength(0);
    await chat.drain();
    expect(of('UsageCharged')).toHaveLength(1);
  });
});

describe('Messages', () => {
  it("records the generation under /v1/messages, answers in the Messages format, and lists the interface's ignored fields", async () => {
    const { chat, of } = setUp();
    const messages = new Messages(chat, { error: () => undefined });
    const request = messages.read({ model: 'sim/echo', max_tokens: 64, messages: [{ role: 'user', content: 'Hi' }], unknown_field: 1 });
    const answer = await messages.answer(caller, request, {}, () => new MemorySink());
    expect(of('HoldPlaced')[0].data.endpoint).toBe('/v1/messages');
    expect(answer.headers['x-svc-ignored-params']).toBe('unknown_field');
    expect(answer.json).toMatchObject({ type: 'message', id: answer.generationId, model: 'sim/echo' });
  });
});

describe('Embeddings', () => {
  it('charges the input tokens at the answering provider, and presents the cost it charged', async () => {
    const { calls, of } = setUp();
    const embeddings = new Embeddings({ calls, routing: { catalog, clock, providerStats: new ProviderStats() } });
    const { body } = await embeddings.create(caller, embeddingsRequest({ model: 'sim/embed', input: ['one', 'two'] }));
    const [charge] = of('UsageCharged');
    expect(charge.data.usage).toEqual({ input: body.usage.prompt_tokens });
    expect(body.usage.cost).toBe(nanoToUsd(BigInt(charge.data.amount_nano)));
  });
});
