import { PgSqlRunner, usdToNano } from '@svc/platform';
import { GATEWAY_LEASE_MS } from '@svc/ledger';
import { twoGateways } from '../support/second-gateway';
import { until } from '../support/until';

const ADMIN_TOKEN = 'admin-token-for-gateway-pause-tests';
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
/** One-token chunks this far apart: a stream of ~6 s, paused in its middle. */
const CHUNK_DELAY_MS = 60;
const OUTPUT_TOKENS = 100;

/**
 * Issue 41 D: a gateway paused past its lease (GC, CPU starvation, SIGSTOP) had its holds
 * settled behind its back from what it had recorded: its streams then delivered their whole
 * output, were billed only what was recorded (162 tokens delivered, 21 billed) and ended with
 * a `hold_not_open` error; a non-streamed answer already given got 400 `hold_not_open`. The
 * reaper still settles such holds (the process may be dead), and the process, alive after
 * all, charges what it delivered on top: a correction, once.
 */
describe('issue 41 D: a gateway paused past its lease finishes and charges what it delivered', () => {
  const gateways = twoGateways('pause', ADMIN_TOKEN);
  let db: PgSqlRunner;

  beforeAll(async () => {
    db = await PgSqlRunner.connect({ connectionString: gateways.databaseUrl, max: 2 });
  });
  afterAll(async () => {
    gateways.second?.child.kill('SIGCONT');
    await db?.close();
  });

  it('streams to the end without an error, the non-streamed answer is 200, and both are billed in full', async () => {
    const account = (await gateways.one('POST', '/admin/accounts', { body: { initial_credits_usd: 5 }, headers: admin })).json.id;
    const key = (await gateways.one('POST', `/admin/accounts/${account}/keys`, { body: {}, headers: admin })).json.key;
    const before = (await gateways.one('GET', '/v1/credits', { key })).json.data.balance as number;
    const post = (body: unknown) =>
      fetch(`${gateways.second.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });

    // Answered by the upstream (in the paused process) after the pause: nothing of it is recorded when its hold is reaped.
    const plain = post({ model: 'sim/echo', max_tokens: 16, messages: [{ role: 'user', content: 'later\n#sim {"delay_ms": 5000}' }] });
    const response = await post({
      model: 'sim/echo',
      stream: true,
      stream_options: { include_usage: true },
      max_tokens: OUTPUT_TOKENS,
      messages: [{ role: 'user', content: `go\n#sim {"completion_tokens": ${OUTPUT_TOKENS}, "chunk_delay_ms": ${CHUNK_DELAY_MS}}` }],
    });
    expect(response.status).toBe(200);
    const generationId = response.headers.get('x-svc-generation-id')!;
    const reader = response.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    // Past one progress record (every 2 s), then pause the process past its lease.
    const started = Date.now();
    while (Date.now() - started < 2_500) {
      const { value, done } = await reader.read();
      if (done) throw new Error('the stream ended before the pause');
      text += decoder.decode(value, { stream: true });
    }
    gateways.second.child.kill('SIGSTOP');
    try {
      // The reaper (in this process) settles both holds from what was recorded: it cannot tell a pause from a death.
      // The stopped process cannot renew its lease: it is run out now rather than sat out (GATEWAY_LEASE_MS),
      // on every pass, for a renewal sent just before the stop may land after.
      const reaped = await until(
        'the reaper to settle both holds',
        async () => {
          await db.query(
            `UPDATE gateway_leases SET expires_at = now()
              WHERE gateway_id IN (SELECT metadata->>'gateway' FROM events WHERE type = 'HoldPlaced' AND data->>'account_id' = $1)`,
            [account],
          );
          await gateways.first.background.reaper.reapOnce();
          const { rows } = await db.query<{ type: string; data: { hold_id: string; amount_nano: string } }>(
            `SELECT type, data FROM events WHERE type IN ('UsageCharged', 'HoldReleased') AND data->>'account_id' = $1 AND data ? 'reaped'`,
            [account],
          );
          return rows.length === 2 ? rows : null;
        },
        GATEWAY_LEASE_MS + 20_000,
        200,
      );
      expect(reaped.find((e) => e.data.hold_id === generationId)?.type).toBe('UsageCharged');
    } finally {
      gateways.second.child.kill('SIGCONT');
    }

    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
    const frames = text
      .split('\n\n')
      .filter((f) => f.startsWith('data: '))
      .map((f) => f.slice(6));
    expect(frames[frames.length - 1]).toBe('[DONE]');
    const chunks = frames.slice(0, -1).map((f) => JSON.parse(f));
    expect(chunks.some((c) => c.error)).toBe(false);
    const usage = chunks[chunks.length - 1].usage;
    expect(usage.completion_tokens).toBe(OUTPUT_TOKENS);

    const answered = (await (await plain).json()) as { id: string; usage: { cost: number } };
    expect(answered.usage.cost).toBeGreaterThan(0);

    // Each generation shows its whole charge, and the balance moved by exactly both.
    const billed = await until(
      'both generations billed in full',
      async () => {
        await gateways.first.runtime.projections.catchUpAll();
        const stream = (await gateways.one('GET', `/v1/generation?id=${generationId}`, { key })).json.data;
        const single = (await gateways.one('GET', `/v1/generation?id=${answered.id}`, { key })).json.data;
        return stream?.tokens_completion === OUTPUT_TOKENS && single?.total_cost > 0 ? { stream, single } : null;
      },
      10_000,
      200,
    );
    expect(usdToNano(billed.stream.total_cost)).toBe(usdToNano(usage.cost));
    expect(usdToNano(billed.single.total_cost)).toBe(usdToNano(answered.usage.cost));
    const after = (await gateways.one('GET', '/v1/credits', { key })).json.data;
    expect(after.open_holds).toBe(0);
    expect(usdToNano(before) - usdToNano(after.balance)).toBe(usdToNano(usage.cost) + usdToNano(answered.usage.cost));
    const corrections = await db.query(`SELECT 1 FROM events WHERE type = 'UsageCorrected' AND data->>'account_id' = $1`, [account]);
    expect(corrections.rows).toHaveLength(2);
    // Activity counts the two requests once each, billed, at their whole cost.
    const activity = (await gateways.one('GET', '/v1/activity', { key })).json.data as { requests: number; requests_not_billed: number; usage: number }[];
    expect(activity.reduce((n, r) => n + r.requests, 0)).toBe(2);
    expect(activity.reduce((n, r) => n + r.requests_not_billed, 0)).toBe(0);
    expect(activity.reduce((n, r) => n + usdToNano(r.usage), 0n)).toBe(usdToNano(usage.cost) + usdToNano(answered.usage.cost));
  }, 90_000);

  // Issue 45: the paused gateway comes back further behind on the account than a refused append
  // brings back, with a snapshot of the account kept meanwhile by the other: it catches up from
  // the snapshot, and its charge lands on the right balance.
  it('charges exactly after a pause in which the other gateway moved the account far on and kept a snapshot', async () => {
    const account = (await gateways.one('POST', '/admin/accounts', { body: { initial_credits_usd: 5 }, headers: admin })).json.id;
    const key = (await gateways.one('POST', `/admin/accounts/${account}/keys`, { body: {}, headers: admin })).json.key;
    const before = (await gateways.one('GET', '/v1/credits', { key })).json.data.balance as number;
    const chat = (content: string) => ({ body: { model: 'sim/echo', max_tokens: 16, messages: [{ role: 'user', content }] }, key });
    const ids: string[] = [];
    // The second gateway knows the account, then starts a slow request and is paused before it ends.
    ids.push((await gateways.two('POST', '/v1/chat/completions', chat('warm'))).json.id);
    const slow = gateways.two('POST', '/v1/chat/completions', chat('slow\n#sim {"delay_ms": 2000}'));
    await until(
      'the slow request to hold',
      async () => ((await db.query(`SELECT 1 FROM events WHERE type = 'HoldPlaced' AND data->>'account_id' = $1`, [account])).rows.length === 2 ? true : null),
      10_000,
      20,
    );
    gateways.second.child.kill('SIGSTOP');
    try {
      // 80 requests elsewhere: 160 events, more than the 64 a refusal brings back and past a snapshot.
      for (let i = 0; i < 80; i++) {
        const answered = await gateways.one('POST', '/v1/chat/completions', chat(`elsewhere ${i}`));
        expect(answered.status).toBe(200);
        ids.push(answered.json.id);
      }
      const kept = await until(
        'a snapshot of the account',
        async () =>
          (await db.query<{ revision: string }>('SELECT revision::text AS revision FROM stream_snapshots WHERE stream = $1', [`account-${account}`])).rows[0] ??
          null,
        10_000,
        50,
      );
      expect(BigInt(kept.revision)).toBeGreaterThanOrEqual(127n);
    } finally {
      gateways.second.child.kill('SIGCONT');
    }
    const late = await slow;
    expect(late.status).toBe(200);
    ids.push(late.json.id);

    // Every generation billed, and the balance moved by exactly their sum, the late charge included.
    const costs = await until(
      'every generation billed',
      async () => {
        await gateways.first.runtime.projections.catchUpAll();
        const all = await Promise.all(ids.map(async (id) => (await gateways.one('GET', `/v1/generation?id=${id}`, { key })).json.data));
        return all.every((g) => g?.total_cost > 0) ? all.map((g) => usdToNano(g.total_cost)) : null;
      },
      10_000,
      200,
    );
    const after = (await gateways.one('GET', '/v1/credits', { key })).json.data;
    expect(after.open_holds).toBe(0);
    expect(usdToNano(before) - usdToNano(after.balance)).toBe(costs.reduce((sum, cost) => sum + cost, 0n));
    const charged = await db.query(`SELECT 1 FROM events WHERE type = 'UsageCharged' AND data->>'account_id' = $1`, [account]);
    expect(charged.rows).toHaveLength(82);
  }, 90_000);
});
