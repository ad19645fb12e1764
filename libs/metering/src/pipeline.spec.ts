import { parseCatalog } from '@svc/catalog';
import { DomainError } from '@svc/eventstore';
import type { Caller } from '@svc/identity';
import { ManualClock, nanoToUsd, refusalOf } from '@svc/platform';
import { countTextTokens, ProviderError, type Provider } from '@svc/providers';
import { sumOfLines } from './cost-lines';
import { failedGenerationOf } from './failed-generation';
import { tokenMeters, tokenWorstCase } from './meters';
import type { UnsettledCharge } from './metering-deps';
import { MeteredCalls } from './pipeline';
import type { Plan, Reservation, Settlement } from './reservation';
import {
  ACCOUNT,
  AccountLog,
  BYOK_FEE_PERCENT,
  CREDITS,
  cut,
  httpError,
  meteredCalls,
  ScriptedUpstream,
  testCaller,
  timeout,
  usage,
} from './testing/pipeline-fixtures';

/**
 * The pipeline (ARCHITECTURE section 10) against the real account decider: every decision it
 * asks for is decided and folded as the ledger would, so what is asserted is the events an
 * auditor would read. The providers are scripted; the clock is a hand-moved one.
 */

// x/chat: up-a at $2 / $8 per million (cached input $0.50), then up-b at $4 / $16; x/spare, a fallback model, on up-b at $1 / $4.
const catalog = parseCatalog(
  {
    providers: {
      'up-a': { adapter: 'openai', base_url: 'https://a.example/v1', api_key: 'ka' },
      'up-b': { adapter: 'openai', base_url: 'https://b.example/v1', api_key: 'kb' },
    },
    models: [
      {
        id: 'x/chat',
        type: 'chat',
        context_length: 8000,
        pricing: { input: '2', output: '8', cached_input: '0.5' },
        providers: [
          { provider: 'up-a', upstream_model: 'a-chat' },
          { provider: 'up-b', upstream_model: 'b-chat', pricing: { input: '4', output: '16' } },
        ],
      },
      { id: 'x/spare', type: 'chat', context_length: 8000, pricing: { input: '1', output: '4' }, providers: [{ provider: 'up-b', upstream_model: 'b-spare' }] },
    ],
  },
  'pipeline.spec',
);

interface World {
  clock: ManualClock;
  log: AccountLog;
  calls: MeteredCalls;
  unsettled: UnsettledCharge[];
}

/** The pipeline over `upstreams` (the operator's accounts) and `own` (the account's BYOK clients, by provider). */
function world(upstreams: Record<string, Provider>, own: Record<string, Provider> = {}): World {
  const clock = new ManualClock(new Date('2026-11-02T10:00:00Z'));
  const log = new AccountLog(clock);
  const unsettled: UnsettledCharge[] = [];
  return { clock, log, calls: meteredCalls({ clock, catalog, log, upstreams, own, unsettled }), unsettled };
}

const caller = testCaller;

/** A chat call of `models` (the first, then its fallbacks): 1,000 prompt tokens, at most 200 out. */
const plan = (models: string[] = ['x/chat'], promptTokens = 1000): Plan => ({
  models: models.map((id) => {
    const model = catalog.get(id)!;
    return { model, routes: model.providers, fields: {} };
  }),
  headers: {},
  promptTokens,
  worstCase: tokenWorstCase(promptTokens, 200),
  endpoint: '/v1/chat/completions',
});

/** The chat use case without its edge: held, tried, settled from the answer's usage. */
async function chat(w: World, who: Caller = caller(), models?: string[]) {
  const metered = await w.calls.reserve(who, plan(models));
  const { target, value } = await w.calls.attempt(metered, (t) => t.provider.chat!({ model: t.route.upstreamModel }));
  const settlement: Settlement = { usage: tokenMeters(value.usage), latencyMs: value.latencyMs, ttftMs: null };
  const predicted = w.calls.chargeOf(target, settlement);
  const charged = await w.calls.settle(metered, target, settlement);
  return { metered, target, charged, predicted };
}

/** The rejection of `promise`. */
async function failureOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (err) {
    return err;
  }
  throw new Error('it did not fail');
}

// Per million tokens, in nano-USD per token: $1 / M is 1,000 nano a token.
const perM = (usd: number) => BigInt(usd * 1000);

describe('MeteredCalls: reserve -> attempt -> settle (ARCHITECTURE section 10)', () => {
  it('given the first provider failing with a retryable error, when the second answers, then it is charged once, at the second one’s prices (spec 4.2 rule 6)', async () => {
    const a = new ScriptedUpstream([{ fails: httpError(503) }]);
    const b = new ScriptedUpstream([{ usage: usage(1000, 100) }]);
    const w = world({ 'up-a': a, 'up-b': b });

    const { target, charged, metered } = await chat(w);

    expect([a.asked, b.asked]).toEqual([['a-chat'], ['b-chat']]);
    expect(target.route.provider.name).toBe('up-b');
    // The hold covered the dearest target's worst case: up-b, 1,000 in and 200 out.
    expect(w.log.only('HoldPlaced').amount_nano).toBe((1000n * perM(4) + 200n * perM(16)).toString());
    expect(charged).toBe(1000n * perM(4) + 100n * perM(16));
    expect(w.log.decided()).toEqual(['HoldPlaced', 'UsageCharged']);
    expect(w.log.only('UsageCharged')).toMatchObject({ hold_id: metered.reservation.id, amount_nano: charged.toString(), provider: 'up-b', model: 'x/chat' });
    expect(w.log.available()).toBe(CREDITS - charged);
  });

  it("given a plan whose admission waits for its prompt (spec 8), when reserved, then the admission counts the prompt before the hold, its headers are the call's, and a refusal holds nothing", async () => {
    const w = world({ 'up-a': new ScriptedUpstream([]), 'up-b': new ScriptedUpstream([]) });
    const counted: number[] = [];
    const admitted = await w.calls.reserve(caller(), {
      ...plan(),
      admission: async (tokens) => {
        counted.push(tokens);
        expect(w.log.decided()).toEqual([]);
        return { 'x-ratelimit-remaining-tokens': '7' };
      },
    });
    expect(counted).toEqual([1000]);
    expect(admitted.headers['x-ratelimit-remaining-tokens']).toBe('7');
    expect(w.log.decided()).toEqual(['HoldPlaced']);

    const refusal = new DomainError('tokens_limit_exceeded', 'over', {}, 'rate_limited');
    const refused = await failureOf(w.calls.reserve(caller(), { ...plan(), admission: () => Promise.reject(refusal) }));
    expect(refused).toBe(refusal);
    expect(w.log.decided()).toEqual(['HoldPlaced']);
  });

  it('given a plan whose request was admitted already (an idempotency claim came first), when reserved, then the prompt is counted alone, with its headers', async () => {
    const upstreams = { 'up-a': new ScriptedUpstream([]), 'up-b': new ScriptedUpstream([]) };
    const w = world(upstreams);
    const alone: number[] = [];
    const calls = meteredCalls({
      clock: w.clock,
      catalog,
      log: w.log,
      upstreams,
      tokenLimits: {
        consumePrompt: async (_who, tokens) => (alone.push(tokens), { 'x-ratelimit-remaining-tokens': '5' }),
        recordOutput: async () => undefined,
      },
    });
    const metered = await calls.reserve(caller(), { ...plan(), admission: async () => null });
    expect(alone).toEqual([1000]);
    expect(metered.headers['x-ratelimit-remaining-tokens']).toBe('5');
    expect(w.log.decided()).toEqual(['HoldPlaced']);
  });

  it('given the upstream refusing the request (400), when attempted, then no other target is tried, the hold is released and the 400 is the answer', async () => {
    const refusal = httpError(400);
    const a = new ScriptedUpstream([{ fails: refusal }]);
    const b = new ScriptedUpstream([{ usage: usage(1000, 100) }]);
    const w = world({ 'up-a': a, 'up-b': b });

    const err = await failureOf(chat(w));

    expect(err).toBe(refusal);
    expect(b.asked).toEqual([]);
    const held = w.log.only('HoldPlaced');
    // Issue 15.2: the failure names its generation, whose record says why.
    expect(failedGenerationOf(err)).toBe(held.hold_id);
    expect(w.log.decided()).toEqual(['HoldPlaced', 'HoldReleased']);
    expect(w.log.only('HoldReleased')).toMatchObject({ hold_id: held.hold_id, reason: 'error', error_code: 'upstream_400', provider: 'up-a' });
    expect(w.log.available()).toBe(CREDITS);
  });

  it("given the account's own key for the first provider (BYOK), when that provider rejects it (401), then the operator's key is not tried, the hold is released and the caller is told the saved key was refused (spec 7)", async () => {
    const own = new ScriptedUpstream([{ fails: httpError(401) }]);
    const a = new ScriptedUpstream([{ usage: usage(1000, 100) }]);
    const b = new ScriptedUpstream([{ usage: usage(1000, 100) }]);
    const w = world({ 'up-a': a, 'up-b': b }, { 'up-a': own });

    const err = await failureOf(chat(w, caller(['up-a'])));

    expect(err).toBeInstanceOf(DomainError);
    expect(refusalOf(err)).toMatchObject({ status: 401, type: 'authentication_error', code: 'byok_key_rejected' });
    expect([own.asked, a.asked, b.asked]).toEqual([['a-chat'], [], []]);
    expect(w.log.decided()).toEqual(['HoldPlaced', 'HoldReleased']);
    expect(w.log.only('HoldReleased')).toMatchObject({ reason: 'error', error_code: 'byok_key_rejected', provider: 'up-a:byok' });
    expect(w.log.available()).toBe(CREDITS);
  });

  it('given every target failing provider-side, when attempted, then the hold is released, nothing is charged, and the caller gets 504 once the last model timed out (spec 1 rule 3, spec 7)', async () => {
    const a = new ScriptedUpstream([{ fails: httpError(503) }]);
    const b = new ScriptedUpstream([{ fails: httpError(502) }, { fails: timeout() }]);
    const w = world({ 'up-a': a, 'up-b': b });

    const err = await failureOf(chat(w, caller(), ['x/chat', 'x/spare']));

    expect([a.asked, b.asked]).toEqual([['a-chat'], ['b-chat', 'b-spare']]);
    expect(refusalOf(err)).toMatchObject({ status: 504, type: 'api_error', code: 'upstream_timeout' });
    expect(w.log.decided()).toEqual(['HoldPlaced', 'HoldReleased']);
    expect(w.log.only('HoldReleased')).toMatchObject({ reason: 'error', error_code: 'upstream_504', model: 'x/spare', provider: 'up-b' });
    expect(w.log.available()).toBe(CREDITS);
  });

  it('given an answer that returned nothing, when settled, then it is not billed: the hold is released as zero_completion (spec 1 rule 3)', async () => {
    const w = world({ 'up-a': new ScriptedUpstream([{ usage: usage(1000, 0) }]), 'up-b': new ScriptedUpstream([]) });

    const { charged, predicted } = await chat(w);

    expect([charged, predicted]).toEqual([0n, 0n]);
    expect(w.log.decided()).toEqual(['HoldPlaced', 'HoldReleased']);
    expect(w.log.only('HoldReleased')).toMatchObject({ reason: 'zero_completion', prompt_tokens: 1000, completion_tokens: 0 });
    expect(w.log.available()).toBe(CREDITS);
  });

  it('given an answer, when settled, then the amount charged is the one recorded, the one its cost lines add up to, and the usage.cost the caller is shown (spec 1 rule 2)', async () => {
    const w = world({ 'up-a': new ScriptedUpstream([{ usage: usage(1000, 150, 400) }]), 'up-b': new ScriptedUpstream([]) });

    const { charged, predicted } = await chat(w);

    // 600 input at $2, 400 cached at $0.50, 150 output at $8 per million.
    const expected = 600n * perM(2) + 400n * perM(0.5) + 150n * perM(8);
    expect(charged).toBe(expected);
    // What a batch line shows before it settles (chargeOf) is what settling charges.
    expect(predicted).toBe(expected);
    const recorded = w.log.only('UsageCharged');
    expect(BigInt(recorded.amount_nano)).toBe(expected);
    expect(sumOfLines(recorded.lines!)).toBe(expected);
    expect(nanoToUsd(charged)).toBe(0.0026);
  });

  it('given an answer whose charge commits but whose acknowledgement is lost (a database failover), when settled, then it is retried, found settled, and charged once (issue 43)', async () => {
    const w = world({ 'up-a': new ScriptedUpstream([{ usage: usage(1000, 100) }]), 'up-b': new ScriptedUpstream([]) });
    w.log.faults.push({ command: 'ChargeUsage', when: 'after', times: 1 });

    const { charged } = await chat(w);

    expect(charged).toBe(1000n * perM(2) + 100n * perM(8));
    expect(w.log.decided()).toEqual(['HoldPlaced', 'UsageCharged']);
    expect(w.log.available()).toBe(CREDITS - charged);
  });

  it('given an answer whose charge cannot reach the store for a while (a database failover), when settled, then it lands once the store is back and the caller gets its cost (issue 43)', async () => {
    const w = world({ 'up-a': new ScriptedUpstream([{ usage: usage(1000, 100) }]), 'up-b': new ScriptedUpstream([]) });
    w.log.faults.push({ command: 'ChargeUsage', when: 'before', times: 3 });

    const { charged } = await chat(w);

    expect(charged).toBe(1000n * perM(2) + 100n * perM(8));
    expect(w.log.decided()).toEqual(['HoldPlaced', 'UsageCharged']);
    expect(w.log.only('UsageCharged').amount_nano).toBe(charged.toString());
  });

  it('given a provider counting more input than was held for, when settled, then the work is charged in full and the excess recorded for the auditor', async () => {
    const w = world({ 'up-a': new ScriptedUpstream([{ usage: usage(5000, 200) }]), 'up-b': new ScriptedUpstream([]) });

    const { charged } = await chat(w);

    expect(charged).toBe(5000n * perM(2) + 200n * perM(8));
    const held = BigInt(w.log.only('HoldPlaced').amount_nano);
    expect(w.log.only('UsageCharged')).toMatchObject({ amount_nano: charged.toString(), exceeded_hold_nano: (charged - held).toString() });
  });

  describe('a reservation settled where its call is gone (a job, a realtime response)', () => {
    /** Another process's pipeline over the same account: no provider client at all, so none can be used. */
    const elsewhere = (w: World) =>
      new MeteredCalls({
        clock: w.clock,
        catalog,
        providers: new Map(),
        own: { resolver: () => () => null },
        byokFeePercent: BYOK_FEE_PERCENT,
        upstreamTimeoutMs: 60_000,
        ledger: w.log.ledger,
        tokenLimits: { consumePrompt: async () => ({}), recordOutput: async () => undefined },
        leaseId: () => undefined,
        warn: () => undefined,
      });

    /** A batch line's call (spec 1 rule 6): held at the batch discount under the line's hold id, answered, and kept as JSON. */
    async function answeredLine(w: World) {
      const metered = await w.calls.reserve(caller(), plan(), { job: { holdId: 'batch_1-line-1', ttlMs: 3_600_000, batchDiscount: true } });
      const { target, value } = await w.calls.attempt(metered, (t) => t.provider.chat!({ model: t.route.upstreamModel }));
      const settlement: Settlement = { usage: tokenMeters(value.usage), latencyMs: value.latencyMs, ttftMs: null };
      const kept = JSON.parse(JSON.stringify({ reservation: metered.reservation, settlement })) as { reservation: Reservation; settlement: Settlement };
      return {
        ...kept,
        answered: { model: target.model.id, provider: target.route.provider.name, byok: target.byok },
        shown: w.calls.chargeOf(target, settlement),
      };
    }

    it('given a batch line answered and kept, when another process settles it from the reservation alone, then it is charged at the answering target’s batch price, as the line showed', async () => {
      const w = world({ 'up-a': new ScriptedUpstream([{ fails: httpError(500) }]), 'up-b': new ScriptedUpstream([{ usage: usage(1000, 100) }]) });
      const { reservation, settlement, answered, shown } = await answeredLine(w);

      const charged = await elsewhere(w).settleReservation(reservation, answered, settlement);

      // up-b's price, at the catalog's default batch discount of 50%.
      expect(charged).toBe((1000n * perM(4) + 100n * perM(16)) / 2n);
      expect(charged).toBe(shown);
      expect(w.log.decided()).toEqual(['HoldPlaced', 'UsageCharged']);
      expect(w.log.only('UsageCharged')).toMatchObject({ hold_id: 'batch_1-line-1', amount_nano: charged!.toString(), provider: 'up-b' });
    });

    it('given a hold settled already, when a later attempt settles it again, then nothing more is charged and it says so (null)', async () => {
      const w = world({ 'up-a': new ScriptedUpstream([{ usage: usage(1000, 100) }]), 'up-b': new ScriptedUpstream([]) });
      const { reservation, settlement, answered } = await answeredLine(w);
      await elsewhere(w).settleReservation(reservation, answered, settlement);

      expect(await elsewhere(w).settleReservation(reservation, answered, settlement)).toBeNull();
      expect(w.log.decided()).toEqual(['HoldPlaced', 'UsageCharged']);
    });

    it('given a charge decided already (a video’s, capped at its hold), when settled, then that amount is recorded with its lines, whatever its usage would price at', async () => {
      const w = world({ 'up-a': new ScriptedUpstream([{ usage: usage(1000, 100) }]), 'up-b': new ScriptedUpstream([]) });
      const { reservation, answered } = await answeredLine(w);
      const amountNano = 1_234n;
      const lines = [{ meter: 'provider_cost', quantity: 1_234, unit_price_usd: '0.000000001', amount_nano: '1234' }];

      const charged = await elsewhere(w).settleReservation(reservation, answered, {
        amountNano,
        usage: { provider_cost: 1_234 },
        lines,
        providerCostNano: 1_000n,
        latencyMs: 9_000,
        returned: 1,
      });

      expect(charged).toBe(amountNano);
      expect(w.log.only('UsageCharged')).toMatchObject({
        amount_nano: '1234',
        lines,
        provider_cost_nano: '1000',
        latency_ms: 9_000,
        usage: { provider_cost: 1_234 },
      });
    });

    it('given a target no longer among the reservation’s, when settled, then it is refused and the hold left open', async () => {
      const w = world({ 'up-a': new ScriptedUpstream([{ usage: usage(1000, 100) }]), 'up-b': new ScriptedUpstream([]) });
      const { reservation, settlement } = await answeredLine(w);

      const err = await failureOf(elsewhere(w).settleReservation(reservation, { model: 'x/spare', provider: 'up-b', byok: false }, settlement));

      expect(refusalOf(err)).toMatchObject({ status: 500, code: 'internal_error' });
      expect(w.log.decided()).toEqual(['HoldPlaced']);
    });

    it('given only a hold’s id (an attempt abandoned by a worker that died), when released, then the hold is given back unbilled, once', async () => {
      const w = world({ 'up-a': new ScriptedUpstream([{ usage: usage(1000, 100) }]), 'up-b': new ScriptedUpstream([]) });
      await answeredLine(w);
      const held = { id: 'batch_1-line-1', accountId: ACCOUNT, keyId: 'k1', endpoint: '/v1/chat/completions', metadata: { actor: 'batches' } };

      expect(await elsewhere(w).releaseReservation(held, 'batch_line_abandoned')).toBe(true);
      expect(await elsewhere(w).releaseReservation(held, 'batch_line_abandoned')).toBe(false);

      expect(w.log.decided()).toEqual(['HoldPlaced', 'HoldReleased']);
      expect(w.log.only('HoldReleased')).toMatchObject({
        hold_id: 'batch_1-line-1',
        reason: 'error',
        error_code: 'batch_line_abandoned',
        endpoint: '/v1/chat/completions',
      });
      expect(w.log.available()).toBe(CREDITS);
    });
  });

  describe('a stream cut short (spec 1 rule 4; issue 41 A)', () => {
    /** The streamed chat use case without its edge: the text that arrived before the cut, and the charge for it. */
    async function streamUntilCut(w: World) {
      const metered = await w.calls.reserve(caller(), plan());
      const started = w.clock.now().getTime();
      // A stream that fails before its first chunk is a failed attempt: the next target is tried.
      const { target, value: opened } = await w.calls.attempt(metered, async (t) => {
        const chunks = t.provider.chat_stream!({ model: t.route.upstreamModel, stream: true });
        const first = await chunks.next();
        return { chunks, first };
      });
      let delivered = opened.first.done ? '' : (opened.first.value.choices[0]?.delta.content ?? '');
      let failure: unknown = null;
      try {
        for await (const chunk of { [Symbol.asyncIterator]: () => opened.chunks }) delivered += chunk.choices[0]?.delta.content ?? '';
      } catch (err) {
        failure = err;
      }
      const output = countTextTokens(delivered);
      const settlement: Settlement = { usage: { input: 1000, output }, latencyMs: w.clock.now().getTime() - started, ttftMs: 0 };
      return { metered, target, failure, output, settle: () => w.calls.settleDelivered(metered, target, settlement) };
    }

    it('given a stream that breaks after delivering part of its output, when the charge commits but its answer is lost, then what was delivered is charged once and reported', async () => {
      const pieces = ['The quick', ' brown fox', ' jumps'];
      const w = world({ 'up-a': new ScriptedUpstream([{ streams: pieces, thenFails: cut() }]), 'up-b': new ScriptedUpstream([]) });
      w.log.faults.push({ command: 'ChargeUsage', when: 'after', times: 1 });

      const { failure, output, settle } = await streamUntilCut(w);
      const charged = await settle();

      expect(failure).toBeInstanceOf(ProviderError);
      expect(output).toBe(countTextTokens(pieces.join('')));
      expect(output).toBeGreaterThan(0);
      expect(charged).toBe(1000n * perM(2) + BigInt(output) * perM(8));
      expect(w.log.decided()).toEqual(['HoldPlaced', 'UsageCharged']);
      expect(w.log.only('UsageCharged')).toMatchObject({ amount_nano: charged.toString(), completion_tokens: output, provider: 'up-a' });
    });

    it('given a stream that breaks after delivering part of its output, when the store stays unreachable past the retries, then the charge is kept for the hold reaper, never released', async () => {
      jest.useFakeTimers({ doNotFake: ['performance', 'queueMicrotask', 'nextTick'] });
      try {
        const w = world({ 'up-a': new ScriptedUpstream([{ streams: ['Hello', ' there'], thenFails: cut() }]), 'up-b': new ScriptedUpstream([]) });
        w.log.faults.push({ command: 'ChargeUsage', when: 'before', times: 100 });

        const { metered, output, settle } = await streamUntilCut(w);
        const outcome = settle().then(
          (amount) => ({ amount }),
          (error: unknown) => ({ error }),
        );
        // The retries back off to about 30 s in all.
        await jest.advanceTimersByTimeAsync(60_000);

        const expected = 1000n * perM(2) + BigInt(output) * perM(8);
        expect(await outcome).toEqual({ amount: expected });
        expect(w.unsettled).toHaveLength(1);
        expect(w.unsettled[0]).toMatchObject({ holdId: metered.reservation.id, accountId: ACCOUNT, command: { type: 'ChargeUsage', amountNano: expected } });
        // Nothing reached the log: the hold stays open for the reaper to charge.
        expect(w.log.decided()).toEqual(['HoldPlaced']);
      } finally {
        jest.useRealTimers();
      }
    });

    it('given a charge the account refuses outright, when settling delivered output, then it is not kept: the refusal is the answer', async () => {
      const w = world({ 'up-a': new ScriptedUpstream([{ streams: ['Hello'], thenFails: cut() }]), 'up-b': new ScriptedUpstream([]) });
      const { metered, target, settle } = await streamUntilCut(w);
      // Released meanwhile, as a session that closed first would.
      await w.calls.release(metered.reservation, target, new Error('closed'), 0, 'session_closed');

      const err = await failureOf(settle());

      expect(err).toBeInstanceOf(DomainError);
      expect(err).toMatchObject({ code: 'hold_not_open' });
      expect(w.unsettled).toEqual([]);
      expect(w.log.only('HoldReleased').hold_id).toBe(metered.reservation.id);
    });
  });
});
