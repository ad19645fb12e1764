import { randomBytes } from 'node:crypto';
import { ManualClock } from '@svc/platform';
import { api, type Call, freshPgSchemaUrl, startGateway, stopGateway, type StartedGateway } from '../support/gateway';

/** Incompressible text: PostgreSQL cannot squeeze it under the ~2.7 KB a btree index row may hold. */
const randomUser = (chars: number) => randomBytes(chars).toString('base64url').slice(0, chars);

/**
 * Issue 41 C: an end-user id of 3 KB (`user` of chat completions, spec 4.2; `metadata.user_id`
 * of messages, spec 4.3; the spec states no maximum for either) made PostgreSQL refuse the
 * activity projection's index row, which stopped that projection for every account: GET
 * /v1/activity stalled and /health/ready answered 503 once the stuck event was 30 s old.
 */
describe('requests naming a 3 KB end user, on PostgreSQL (issue 41 C)', () => {
  const clock = new ManualClock(new Date('2026-11-02T10:00:00Z'));
  let gw: StartedGateway;
  let call: Call;
  let root: Call;

  beforeAll(async () => {
    gw = await startGateway({ DATABASE_URL: await freshPgSchemaUrl('long_user') }, undefined, { clock });
    call = api(gw.url);
    root = api(gw.url.replace(/\/v1$/, ''));
  }, 60_000);
  afterAll(() => stopGateway(gw));

  it('are billed and counted in activity under their end user, and requests after them still reach activity, the generation lookup and a ready health check', async () => {
    const key = gw.keys.live_api_key;
    const chatUser = randomUser(3000);
    const messagesUser = randomUser(3000);

    const chat = await call('POST', '/chat/completions', {
      key,
      body: { model: 'sim/echo', messages: [{ role: 'user', content: 'hi' }], max_tokens: 16, user: chatUser },
    });
    expect(chat.status).toBe(200);
    const messages = await call('POST', '/messages', {
      headers: { 'x-api-key': key, 'anthropic-version': '2023-06-01' },
      body: { model: 'sim/echo', max_tokens: 16, messages: [{ role: 'user', content: 'hello' }], metadata: { user_id: messagesUser } },
    });
    expect(messages.status).toBe(200);
    const after = await call('POST', '/chat/completions', {
      key,
      body: { model: 'sim/echo', messages: [{ role: 'user', content: 'and then' }], max_tokens: 16 },
    });
    expect(after.status).toBe(200);

    // The request after them has its generation record, with the cost it was charged.
    const generation = await call('GET', `/generation?id=${after.json.id}`, { key });
    expect(generation.status).toBe(200);
    expect(generation.json.data.total_cost).toBe(after.json.usage.cost);

    // Activity counts all three, and filters by either long end user exactly.
    const requestsOf = async (query: string) => {
      const r = await call('GET', `/activity${query}`, { key });
      expect(r.status).toBe(200);
      return (r.json.data as { endpoint: string; requests: number }[]).map((row) => [row.endpoint, row.requests]);
    };
    expect((await requestsOf('')).sort()).toEqual([
      ['/v1/chat/completions', 2],
      ['/v1/messages', 1],
    ]);
    expect(await requestsOf(`?user=${chatUser}`)).toEqual([['/v1/chat/completions', 1]]);
    expect(await requestsOf(`?user=${messagesUser}`)).toEqual([['/v1/messages', 1]]);
    expect(await gw.runtime.projections.quarantined()).toEqual([]);

    // Well past the readiness bound (SVC_READY_MAX_LAG_SECONDS, 30 s) since those requests: no
    // projection is left behind on them.
    clock.advance(60_000);
    const ready = await root('GET', '/health/ready');
    expect(ready.status).toBe(200);
    expect(ready.json.checks.projections).toMatchObject({ status: 'ok', lag_seconds: 0 });
  });
});
