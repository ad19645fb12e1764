/**
 * Fakes the pipeline's dependencies allow, for given/when/then specs of billed calls: the
 * account's stream in memory but decided by the real account decider (so a spec reads the
 * events an auditor would), provider accounts whose answers are scripted, and a pipeline over
 * them. Time is the clock the spec passes in.
 */
import type { Catalog } from '@svc/catalog';
import { fold, type EventMetadata, type Handled } from '@svc/eventstore';
import type { Caller } from '@svc/identity';
import { accountDecider, heldNano, type AccountCommand, type AccountEvent, type AccountState } from '@svc/ledger';
import type { Clock } from '@svc/platform';
import { ProviderError, type ChatChunk, type ChatCompletionResult, type NormalizedUsage, type Provider } from '@svc/providers';
import type { MeteringDeps, UnsettledCharge } from '../metering-deps';
import { MeteredCalls } from '../pipeline';

export const ACCOUNT = 'acc1';
/** What the account is credited with when it is opened: $10. */
export const CREDITS = 10_000_000_000n;
export const BYOK_FEE_PERCENT = 5;

/** What one upstream call does: answer with this usage, stream these pieces of text then break, or fail. */
export type Reply = { usage: NormalizedUsage } | { streams: string[]; thenFails: ProviderError } | { fails: ProviderError };

export const usage = (promptTokens: number, completionTokens: number, cachedTokens = 0): NormalizedUsage => ({
  promptTokens,
  completionTokens,
  cachedTokens,
  reasoningTokens: 0,
});
export const httpError = (status: number) => new ProviderError({ kind: 'http', status, message: `HTTP ${status}` });
export const timeout = () => new ProviderError({ kind: 'timeout', status: 504, message: 'timed out' });
export const cut = () => new ProviderError({ kind: 'network', status: 502, message: 'the stream was cut short' });

/** A provider account serving chat, whose answers are scripted, one reply per call, recording the upstream models it was asked for. */
export class ScriptedUpstream implements Provider {
  readonly asked: string[] = [];
  constructor(private readonly replies: Reply[]) {}

  private next(body: object): Reply {
    this.asked.push((body as { model: string }).model);
    const reply = this.replies.shift();
    if (!reply) throw new Error('no reply scripted for this call');
    return reply;
  }

  readonly chat = async (body: object): Promise<ChatCompletionResult> => {
    const reply = this.next(body);
    if ('fails' in reply) throw reply.fails;
    if (!('usage' in reply)) throw new Error('a stream was scripted for a call that does not stream');
    const model = (body as { model: string }).model;
    const message = { role: 'assistant' as const, content: 'x'.repeat(reply.usage.completionTokens) };
    const response = { id: 'up-1', object: 'chat.completion', created: 0, model, choices: [{ index: 0, message, finish_reason: 'stop' }] };
    return { response: response as unknown as ChatCompletionResult['response'], usage: reply.usage, latencyMs: 5 };
  };

  readonly chat_stream = (body: object): AsyncGenerator<ChatChunk> => this.stream(body);

  private async *stream(body: object): AsyncGenerator<ChatChunk> {
    const reply = this.next(body);
    if ('fails' in reply) throw reply.fails;
    if (!('streams' in reply)) throw new Error('an answer was scripted for a call that streams');
    for (const content of reply.streams) {
      yield { id: 'up-1', object: 'chat.completion.chunk', created: 0, model: 'm', choices: [{ index: 0, delta: { content }, finish_reason: null }] };
    }
    throw reply.thenFails;
  }
}

export type DataOf<T extends AccountEvent['type']> = Extract<AccountEvent, { type: T }> extends { data: infer D } ? D : never;

/** A connection lost after the store committed: the decision is in the log, its answer never came. */
export const lostConnection = () => Object.assign(new Error('Connection terminated unexpectedly'), { code: 'ECONNRESET' });

/**
 * The account's stream in memory, decided by the real account decider. `fault` makes the next
 * decision of a type fail: `before` writing (unreachable store) or `after` (answer lost).
 */
export class AccountLog {
  readonly events: AccountEvent[] = [];
  readonly metadata: EventMetadata[] = [];
  faults: Array<{ command: AccountCommand['type']; when: 'before' | 'after'; times: number }> = [];

  constructor(
    private readonly clock: Clock,
    readonly credits: bigint = CREDITS,
  ) {
    this.decide({ type: 'OpenAccount', accountId: ACCOUNT }, {});
    this.decide({ type: 'AddCredits', amountNano: credits, reason: 'signup' }, {});
  }

  readonly ledger = async (accountId: string, command: AccountCommand, metadata: EventMetadata): Promise<Handled<AccountState, AccountEvent>> => {
    expect(accountId).toBe(ACCOUNT);
    const fault = this.faults.find((f) => f.command === command.type && f.times > 0);
    if (fault) fault.times--;
    if (fault?.when === 'before') throw lostConnection();
    const handled = this.decide(command, metadata);
    if (fault?.when === 'after') throw lostConnection();
    return handled;
  };

  private decide(command: AccountCommand, metadata: EventMetadata): Handled<AccountState, AccountEvent> {
    const events = accountDecider.decide(command, this.state(), this.clock.now());
    this.events.push(...events);
    for (const _ of events) this.metadata.push(metadata);
    return { events, state: this.state(), appended: null };
  }

  state(): AccountState {
    return fold(accountDecider, this.events);
  }

  /** The events after the account was opened and credited, by type. */
  decided(): string[] {
    return this.events.slice(2).map((e) => e.type);
  }

  only<T extends AccountEvent['type']>(type: T): DataOf<T> {
    const found = this.events.filter((e) => e.type === type);
    expect(found).toHaveLength(1);
    return found[0].data as DataOf<T>;
  }

  /** Credits not charged and not held. */
  available(): bigint {
    const state = this.state();
    return state.creditsNano - state.chargedNano - heldNano(state);
  }
}

/** The key every call is made with, on ACCOUNT; `ownKeys`: the providers the account saved a key of its own for (BYOK). */
export const testCaller = (ownKeys: string[] = []): Caller =>
  ({
    keyId: 'k1',
    accountId: ACCOUNT,
    workspaceId: 'ws1',
    limit_nano: null,
    limit_reset: null,
    allowed_models: null,
    sealedProviderKeys: new Map(ownKeys.map((provider) => [provider, 'sealed'])),
    guardrails: [],
  }) as unknown as Caller;

/**
 * A pipeline over `log`: `upstreams` are the operator's provider accounts, `own` the account's
 * BYOK clients by provider, used when the caller saved a key for it. Charges kept for the hold
 * reaper go to `unsettled`.
 */
export function meteredCalls(options: {
  clock: Clock;
  catalog: Catalog;
  log: AccountLog;
  upstreams?: Record<string, Provider>;
  own?: Record<string, Provider>;
  unsettled?: UnsettledCharge[];
  tokenLimits?: MeteringDeps['tokenLimits'];
}): MeteredCalls {
  const { upstreams = {}, own = {}, unsettled } = options;
  return new MeteredCalls({
    clock: options.clock,
    catalog: options.catalog,
    providers: new Map(Object.entries(upstreams)),
    own: { resolver: (_accountId, sealed) => (provider) => (sealed.has(provider.name) ? (own[provider.name] ?? null) : null) },
    byokFeePercent: BYOK_FEE_PERCENT,
    upstreamTimeoutMs: 60_000,
    ledger: options.log.ledger,
    tokenLimits: options.tokenLimits ?? { consumePrompt: async () => ({}), recordOutput: async () => undefined },
    leaseId: () => 'gateway-1',
    warn: () => undefined,
    ...(unsettled ? { unsettled: { record: async (charge: UnsettledCharge) => void unsettled.push(charge) } } : {}),
  });
}
