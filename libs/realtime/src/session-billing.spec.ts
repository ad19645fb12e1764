import { loadCatalog } from '@svc/catalog';
import { DomainError } from '@svc/eventstore';
import type { RoutedModel, UnsettledCharge } from '@svc/metering';
import { AccountLog, ACCOUNT, meteredCalls, ScriptedUpstream, testCaller } from '@svc/metering/testing/pipeline-fixtures';
import { ManualClock } from '@svc/platform';
import { EMPTY_TALLY, responseWorstCase } from './billing';
import { REALTIME_ENDPOINT, SessionBilling } from './session-billing';

/**
 * A session's billing (spec 4.16) against the real account decider: what each response and
 * each input transcription leaves in the account's log.
 */

const catalog = loadCatalog();
const routed = (id: string): RoutedModel => {
  const model = catalog.get(id)!;
  return { model, routes: model.providers.slice(0, 1), fields: {} };
};
// sim/realtime: text $4 in, $16 out; audio $32 in, $64 out (per million tokens). sim/transcribe: text $2.50 in, $10 out, audio $6 in.
const realtime = routed('sim/realtime');
const transcribe = routed('sim/transcribe');
const perM = (usd: number) => BigInt(usd * 1000);

function session(credits?: bigint) {
  const clock = new ManualClock(new Date('2026-11-02T10:00:00Z'));
  const log = new AccountLog(clock, credits);
  const unsettled: UnsettledCharge[] = [];
  const warnings: string[] = [];
  const calls = meteredCalls({ clock, catalog, log, upstreams: { sim: new ScriptedUpstream([]) }, unsettled });
  const billing = new SessionBilling({ calls, caller: testCaller(), routed: realtime, warn: (message) => warnings.push(message) });
  return { log, billing, unsettled, warnings };
}

/** A response.done's usage (WIRE-FORMATS 3.3): 100 text and 50 audio tokens in, 20 text and 80 audio tokens out. */
const reported = {
  input_tokens: 150,
  output_tokens: 100,
  input_token_details: { text_tokens: 100, audio_tokens: 50 },
  output_token_details: { text_tokens: 20, audio_tokens: 80 },
};
const reportedCost = 100n * perM(4) + 50n * perM(32) + 20n * perM(16) + 80n * perM(64);
const create = { type: 'response.create', response: { max_output_tokens: 500 } };

describe('SessionBilling: each response a billed call (spec 4.16, ARCHITECTURE section 10)', () => {
  it('given a response.create, when held, then the worst case of the conversation so far is held on the session’s key, under the realtime endpoint', async () => {
    const { log, billing } = session();

    const held = await billing.holdResponse(EMPTY_TALLY, create);

    const worst = responseWorstCase(EMPTY_TALLY, create, realtime.routes[0].prices);
    expect(worst).toEqual({ input: 0, audio_input: 0, audio_output: 500 });
    expect(log.only('HoldPlaced')).toMatchObject({
      hold_id: held.metered.reservation.id,
      amount_nano: (500n * perM(64)).toString(),
      endpoint: REALTIME_ENDPOINT,
    });
  });

  it('given a response under way, when its response.done reports usage, then it is charged by meter at the realtime prices and the amount reported', async () => {
    const { log, billing } = session();
    const held = await billing.holdResponse(EMPTY_TALLY, create);
    billing.outputStarted(held);

    const charged = await billing.settleResponse(held, reported);

    expect(charged).toBe(reportedCost);
    expect(log.decided()).toEqual(['HoldPlaced', 'UsageCharged']);
    const charge = log.only('UsageCharged');
    expect(charge).toMatchObject({ amount_nano: reportedCost.toString(), usage: { input: 100, audio_input: 50, output: 20, audio_output: 80 } });
    // Its first output was seen: the generation has a time to first token.
    expect(typeof charge.ttft_ms).toBe('number');
  });

  it('given a response.done that reports no usage, when settled, then the hold is released unbilled (no_usage_reported)', async () => {
    const { log, billing } = session();
    const held = await billing.holdResponse(EMPTY_TALLY, create);

    expect(await billing.settleResponse(held, undefined)).toBeNull();

    expect(log.decided()).toEqual(['HoldPlaced', 'HoldReleased']);
    expect(log.only('HoldReleased')).toMatchObject({ reason: 'error', error_code: 'no_usage_reported' });
  });

  it('given a response that returned no output (failed upstream), when settled, then it is not billed (spec 1 rule 3)', async () => {
    const { log, billing } = session();
    const held = await billing.holdResponse(EMPTY_TALLY, create);

    expect(await billing.settleResponse(held, { input_tokens: 150, output_tokens: 0 })).toBe(0n);

    expect(log.decided()).toEqual(['HoldPlaced', 'HoldReleased']);
    expect(log.only('HoldReleased')).toMatchObject({ reason: 'zero_completion' });
  });

  it('given a session that ends before the response.done, when its response is released, then it is unbilled, and releasing it again changes nothing', async () => {
    const { log, billing, warnings } = session();
    const held = await billing.holdResponse(EMPTY_TALLY, create);

    await billing.releaseResponse(held, true);
    await billing.releaseResponse(held, true);

    expect(log.decided()).toEqual(['HoldPlaced', 'HoldReleased']);
    expect(log.only('HoldReleased')).toMatchObject({ reason: 'error', error_code: 'session_closed', provider: 'sim' });
    expect(warnings).toEqual([]);
    expect(log.available()).toBe(log.credits);
  });

  it('given an account whose credits do not cover the worst case, when a response is asked for, then the hold is refused and nothing is recorded (spec 3.3)', async () => {
    const { log, billing } = session(1_000n);

    await expect(billing.holdResponse(EMPTY_TALLY, create)).rejects.toBeInstanceOf(DomainError);

    expect(log.decided()).toEqual([]);
  });

  it('given the store unreachable at response.done for longer than the retries, when settled, then the delivered response’s charge is kept for the hold reaper (issue 41 A)', async () => {
    jest.useFakeTimers({ doNotFake: ['performance', 'queueMicrotask', 'nextTick'] });
    try {
      const { log, billing, unsettled } = session();
      const held = await billing.holdResponse(EMPTY_TALLY, create);
      log.faults.push({ command: 'ChargeUsage', when: 'before', times: 100 });

      const settled = billing.settleResponse(held, reported);
      await jest.advanceTimersByTimeAsync(60_000);

      expect(await settled).toBe(reportedCost);
      expect(unsettled).toEqual([
        expect.objectContaining({ holdId: held.metered.reservation.id, accountId: ACCOUNT, command: expect.objectContaining({ amountNano: reportedCost }) }),
      ]);
      expect(log.decided()).toEqual(['HoldPlaced']);
    } finally {
      jest.useRealTimers();
    }
  });

  describe('input transcription', () => {
    const completed = (transcript: string, usage: unknown) => ({ type: 'conversation.item.input_audio_transcription.completed', transcript, usage });
    const tokens = { type: 'tokens', input_tokens: 100, output_tokens: 10, input_token_details: { audio_tokens: 100 } };

    it('given a transcription with usage, when billed, then its exact cost is held and charged at once, at the transcription model’s prices', async () => {
      const { log, billing } = session();

      const billed = await billing.billTranscription(transcribe, completed('hello there', tokens));

      const cost = 100n * perM(6) + 10n * perM(10);
      expect(billed).toEqual({ generationId: expect.stringMatching(/^gen-/), charged: cost });
      expect(log.decided()).toEqual(['HoldPlaced', 'UsageCharged']);
      expect(log.only('HoldPlaced')).toMatchObject({ hold_id: billed!.generationId, model: 'sim/transcribe', amount_nano: cost.toString() });
      expect(log.only('UsageCharged')).toMatchObject({ amount_nano: cost.toString(), model: 'sim/transcribe' });
    });

    it('given an empty transcript, when billed, then nothing is charged (spec 1 rule 3)', async () => {
      const { log, billing } = session();

      const billed = await billing.billTranscription(transcribe, completed('', tokens));

      expect(billed?.charged).toBe(0n);
      expect(log.decided()).toEqual(['HoldPlaced', 'HoldReleased']);
    });

    it('given a transcription without usage, when billed, then it is not billed and nothing is held', async () => {
      const { log, billing, warnings } = session();

      expect(await billing.billTranscription(transcribe, completed('hello', undefined))).toBeNull();

      expect(log.decided()).toEqual([]);
      expect(warnings).toEqual(['realtime sim/realtime: a transcription reported no usage; not billed']);
    });
  });
});
