import { accountStream } from '@svc/ledger';
import { nanoToUsdString, usdToNano } from '@svc/platform';
import { chatWorstCase } from '../support/gateway';
import { twoGateways } from '../support/second-gateway';

const ADMIN_TOKEN = 'admin-token-for-hot-account-tests';
// Every request stays in flight for a while, so all 200 holds are decided while none has settled
// (checked below from the log: on a loaded machine an earlier charge would free room for more).
const messages = [{ role: 'user', content: 'hold on\n#sim {"delay_ms": 8000}' }];
const body = { model: 'sim/echo', messages, max_tokens: 100 };

/**
 * Spec 1, rule 1 under concurrency (issue: ledger): two gateway processes on one PostgreSQL,
 * 200 requests in flight on one account that can afford exactly 120 worst cases: more than
 * the 100 each process receives, so both processes must win some holds (and race for the last).
 */
describe('a hot account never overdraws', () => {
  // 200 in flight on one live key: above the default of 64 concurrent requests, which is not what this measures.
  const gateways = twoGateways('hot', ADMIN_TOKEN, { SVC_RATE_LIMITS_LIVE: 'concurrent=1000' });

  it('exactly 120 of 200 concurrent requests from two processes get a hold; the rest get 402; the balance stays >= 0', async () => {
    const { first, one, two } = gateways;
    const worstCase = chatWorstCase(first.runtime, 'sim/echo', messages, body.max_tokens);
    const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
    const accountId = (await one('POST', '/admin/accounts', { body: { initial_credits_usd: Number(nanoToUsdString(120n * worstCase)) }, headers: admin })).json
      .id;
    const key = (await one('POST', `/admin/accounts/${accountId}/keys`, { body: {}, headers: admin })).json.key;

    const results = await Promise.all(Array.from({ length: 200 }, (_, i) => (i % 2 ? one : two)('POST', '/v1/chat/completions', { key, body })));
    // The premise of "exactly 120": every hold was decided before the first charge released anything.
    const log = (await first.runtime.store.readStream(accountStream(accountId))).map((e) => e.type);
    expect(log.lastIndexOf('HoldPlaced')).toBeLessThan(log.indexOf('UsageCharged'));
    const statuses = results.map((r) => r.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(120);
    expect(statuses.filter((s) => s === 402)).toHaveLength(80);
    for (const r of results.filter((r) => r.status === 402)) expect(r.json.error.type).toBe('insufficient_quota');
    // Both processes admitted some (120 > the 100 each received) and raced for the last holds.
    expect(new Set(results.map((r, i) => (r.status === 200 ? i % 2 : -1)).filter((p) => p >= 0)).size).toBe(2);

    const charged = results.filter((r) => r.status === 200).reduce((sum, r) => sum + usdToNano(r.json.usage.cost), 0n);
    // The other process's last charge may come after this one's: wait for the whole stream.
    const [last] = await first.runtime.store.readStream(accountStream(accountId), { direction: 'backwards', maxCount: 1 });
    await first.runtime.projections.waitFor(last.position, ['credits']);
    const credits = (await one('GET', '/v1/credits', { key })).json.data;
    expect(credits.open_holds).toBe(0);
    expect(usdToNano(credits.total_usage)).toBe(charged);
    expect(usdToNano(credits.balance)).toBe(120n * worstCase - charged);
    expect(credits.balance).toBeGreaterThanOrEqual(0);
  }, 60_000);
});
