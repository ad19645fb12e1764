import { parseCatalog } from '@svc/catalog';
import { tokenMeters, tokenWorstCase, type MeteredCalls } from '@svc/metering';
import { ACCOUNT, AccountLog, httpError, meteredCalls, ScriptedUpstream, testCaller, usage } from '@svc/metering/testing/pipeline-fixtures';
import { ApiError, ManualClock, nanoToUsd, refusalOf } from '@svc/platform';
import { BatchLineCalls, type LineEndpoints } from './line-calls';
import type { ActiveBatch } from './runner';

/**
 * A batch line's billing (spec 4.11, 1 rule 6) against the real account decider: held at the
 * batch discount, answered, kept as JSON, then settled by whichever worker finds it kept.
 */

// x/chat: $2 in, $8 out per million tokens; batch lines at the catalog's default 50% off.
const catalog = parseCatalog(
  {
    providers: { up: { adapter: 'openai', base_url: 'https://up.example/v1', api_key: 'k' } },
    models: [{ id: 'x/chat', type: 'chat', context_length: 8000, pricing: { input: '2', output: '8' }, providers: [{ provider: 'up', upstream_model: 'm' }] }],
  },
  'line-calls.spec',
);
const model = catalog.get('x/chat')!;

const batch: ActiveBatch = {
  batchId: 'batch_1',
  accountId: ACCOUNT,
  workspaceId: 'ws1',
  keyId: 'k1',
  endpoint: '/v1/chat/completions',
  inputFileId: 'file_1',
  status: 'in_progress',
  expiresAt: new Date('2026-11-03T10:00:00Z'),
};

/** A chat endpoint as a line uses it: held with the line's options, answered, its body showing the cost it will be charged. */
const chatEndpoint = (calls: MeteredCalls): LineEndpoints => ({
  async answer(caller, _endpoint, body, options) {
    const plan = {
      models: [{ model, routes: model.providers, fields: {} }],
      headers: {},
      promptTokens: 1000,
      worstCase: tokenWorstCase(1000, 200),
      endpoint: '/v1/chat/completions',
    };
    const metered = await calls.reserve(caller, plan, options);
    const { target, value } = await calls.attempt(metered, (t) => t.provider.chat!({ ...body, model: t.route.upstreamModel }));
    const settlement = { usage: tokenMeters(value.usage), latencyMs: value.latencyMs, ttftMs: null };
    return { metered, target, settlement, present: (charged) => ({ body: { id: metered.reservation.id, usage: { cost: nanoToUsd(charged) } } }) };
  },
  // The service's refusals as the gateway's error mapping answers them, the provider's status as it passes it on (spec 7).
  errorOf: (err) => refusalOf(err) ?? new ApiError((err as { status?: number }).status ?? 500, 'invalid_request_error', (err as Error).message),
});

function worker(upstream: ScriptedUpstream, keyRevoked = false) {
  const clock = new ManualClock(new Date('2026-11-02T10:00:00Z'));
  const log = new AccountLog(clock);
  const lines = (calls: MeteredCalls) =>
    new BatchLineCalls({ calls, endpoints: chatEndpoint(calls), callerOf: async () => (keyRevoked ? null : testCaller()) });
  const calls = meteredCalls({ clock, catalog, log, upstreams: { up: upstream } });
  // Another worker over the same account, with no provider client at all: it only settles what was kept.
  const other = meteredCalls({ clock, catalog, log });
  return { log, here: lines(calls), there: lines(other) };
}

describe('BatchLineCalls: a line held, answered, kept, then settled (spec 4.11, 1 rule 6)', () => {
  it('given a line answered and kept, when another worker settles what was kept, then it is charged once at the batch price, the cost its result line shows', async () => {
    const { log, here, there } = worker(new ScriptedUpstream([{ usage: usage(1000, 100) }]));

    const answer = await here.answer(batch, { messages: [] }, 'batch_1-line-1-1');
    if (!answer.answered) throw new Error('the line was not answered');
    const kept = JSON.parse(JSON.stringify(answer.kept)) as unknown;
    await there.settle(batch, kept);
    await there.settle(batch, kept);

    const price = (1000n * 2000n + 100n * 8000n) / 2n;
    expect(answer.body).toEqual({ id: 'batch_1-line-1-1', usage: { cost: nanoToUsd(price) } });
    expect(log.decided()).toEqual(['HoldPlaced', 'UsageCharged']);
    expect(log.only('UsageCharged')).toMatchObject({ hold_id: 'batch_1-line-1-1', amount_nano: price.toString() });
  });

  it('given an attempt abandoned by a worker that died, when the next attempt releases its hold, then it is given back unbilled, once', async () => {
    const { log, here, there } = worker(new ScriptedUpstream([{ usage: usage(1000, 100) }]));
    await here.answer(batch, { messages: [] }, 'batch_1-line-1-1');

    await there.release(batch, 'batch_1-line-1-1');
    await there.release(batch, 'batch_1-line-1-1');

    expect(log.decided()).toEqual(['HoldPlaced', 'HoldReleased']);
    expect(log.only('HoldReleased')).toMatchObject({ hold_id: 'batch_1-line-1-1', error_code: 'batch_line_abandoned', endpoint: '/v1/chat/completions' });
  });

  it('given the upstream refusing a line, when answered, then the line carries the endpoint’s error and its generation, and its hold is released', async () => {
    const { log, here } = worker(new ScriptedUpstream([{ fails: httpError(400) }]));

    const answer = await here.answer(batch, { messages: [] }, 'batch_1-line-2-1');

    expect(answer).toMatchObject({ answered: false, statusCode: 400, requestId: 'batch_1-line-2-1' });
    expect(log.decided()).toEqual(['HoldPlaced', 'HoldReleased']);
  });

  it('given the key that created the batch revoked, when a line is answered, then it fails with 401 and nothing is held', async () => {
    const { log, here } = worker(new ScriptedUpstream([]), true);

    const answer = await here.answer(batch, { messages: [] }, 'batch_1-line-3-1');

    expect(answer).toMatchObject({ answered: false, statusCode: 401, requestId: null });
    expect(answer.answered ? null : answer.body).toEqual({
      error: {
        type: 'authentication_error',
        code: 'invalid_api_key',
        param: null,
        message: 'The key that created this batch has been revoked or has expired.',
      },
    });
    expect(log.decided()).toEqual([]);
  });
});
