import WebSocket from 'ws';
import { ManualClock } from '@svc/platform';
import { api, freshPgSchemaUrl, startGateway, stopGateway, type Call, type StartedGateway } from '../support/gateway';
import { until } from '../support/until';

/**
 * Issue 41 S1, spec 5 rule 5 ("a revoked key stops working immediately") for realtime sessions
 * (spec 4.16): a session outlives its handshake, so revoking its key, or the key expiring on the
 * injected clock, must end it (close 1008, policy) within seconds, and nothing is billed after.
 * On embedded PGlite the invalidation is in process; on PostgreSQL it travels by NOTIFY.
 */
const ADMIN_TOKEN = 'admin-token-for-realtime-revocation';
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };

type Ev = Record<string, any>;

describe.each([
  ['on embedded PGlite', async () => ({})],
  ['on PostgreSQL', async () => ({ DATABASE_URL: await freshPgSchemaUrl('realtime_revocation') })],
])('a realtime session whose key stops working %s', (_backend, env: () => Promise<Record<string, string>>) => {
  let gw: StartedGateway;
  let call: Call;
  let wsBase: string;
  const clock = new ManualClock(new Date('2026-11-07T12:00:00Z'));

  beforeAll(async () => {
    gw = await startGateway({ ...(await env()), SVC_ADMIN_TOKEN: ADMIN_TOKEN }, undefined, { clock });
    const root = gw.url.replace(/\/v1$/, '');
    call = api(root);
    wsBase = root.replace(/^http/, 'ws');
  }, 90_000);

  afterAll(async () => {
    await stopGateway(gw);
  });

  async function account(keySettings: object = {}) {
    const id = (await call('POST', '/admin/accounts', { headers: admin, body: { initial_credits_usd: 5 } })).json.id as string;
    const full = await call('POST', `/admin/accounts/${id}/keys`, { headers: admin, body: keySettings });
    expect(full.status).toBe(201);
    const management = await call('POST', `/admin/accounts/${id}/keys`, { headers: admin, body: { scope: 'management' } });
    expect(management.status).toBe(201);
    return { key: full.json.key as string, keyId: full.json.data.id as string, management: management.json.key as string };
  }

  /** The account's balance and holds, read with its management key (the full key may be revoked by then). */
  async function credits(management: string) {
    const r = await call('GET', '/v1/credits', { key: management });
    expect(r.status).toBe(200);
    return r.json.data as { balance: number; held: number; open_holds: number };
  }

  async function open(key: string) {
    const ws = new WebSocket(`${wsBase}/v1/realtime?model=sim%2Frealtime`, [], { headers: { authorization: `Bearer ${key}` } });
    const events: Ev[] = [];
    ws.on('message', (data) => events.push(JSON.parse(data.toString())));
    const closed = new Promise<{ code: number; reason: string; at: number }>((resolve) =>
      ws.on('close', (code, reason) => resolve({ code, reason: reason.toString(), at: Date.now() })),
    );
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    const next = (type: string, from = 0) => until(`a ${type} event`, () => events.slice(from).find((e) => e.type === type), 15_000, 5);
    const say = (text: string) => {
      ws.send(JSON.stringify({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text }] } }));
      ws.send(JSON.stringify({ type: 'response.create' }));
    };
    return { ws, events, closed, next, say };
  }

  it('revoked through the API mid-response: error event, close 1008 within seconds, the open response released unbilled', async () => {
    const { key, keyId, management } = await account();
    const s = await open(key);
    await s.next('session.created');
    // One whole response, billed while the key works.
    s.say('Hello');
    const done = await s.next('response.done');
    expect(done.response.usage.cost).toBeGreaterThan(0);
    // A response left running (the simulator stalls it): its hold is open when the key goes.
    const from = s.events.length;
    s.say('#sim {"stall": true}\nkeep talking');
    await s.next('response.created', from);
    const during = await credits(management);
    expect(during.open_holds).toBe(1);

    const revoked = await call('DELETE', `/v1/keys/${keyId}`, { key: management });
    expect(revoked.status).toBe(200);
    const answeredAt = Date.now();
    const closed = await s.closed;
    expect(closed.code).toBe(1008);
    expect(closed.reason).toBe('invalid_api_key');
    expect(closed.at - answeredAt).toBeLessThan(3_000);
    const error = s.events.findLast((e) => e.type === 'error');
    expect(error?.error).toMatchObject({ type: 'authentication_error', code: 'invalid_api_key' });

    // Nothing billed after the close: the stalled response's hold is released, and it stays so.
    const after = await until('the hold released', async () => {
      const c = await credits(management);
      return c.open_holds === 0 ? c : undefined;
    });
    expect(after.held).toBe(0);
    expect(after.balance).toBe(during.balance);
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(await credits(management)).toEqual(after);
    // And the key itself is refused, on the handshake as on HTTP.
    await expect(open(key)).rejects.toThrow(/401/);
  }, 60_000);

  it('expired on the injected clock: closed 1008 with key_expired, nothing held', async () => {
    // Spec 5 rule 4: expiry is set in days (at least 1) from the key's creation on the injected clock.
    const { key, management } = await account({ expires_in_days: 1 });
    clock.advance(24 * 60 * 60_000 - 5 * 60_000);
    const s = await open(key);
    await s.next('session.created');
    clock.advance(3 * 60_000);
    s.ws.send(JSON.stringify({ type: 'input_audio_buffer.clear' }));
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(s.ws.readyState).toBe(WebSocket.OPEN);
    clock.advance(3 * 60_000);
    const closed = await Promise.race([s.closed, new Promise<null>((resolve) => setTimeout(() => resolve(null), 5_000))]);
    expect(closed).toMatchObject({ code: 1008, reason: 'key_expired' });
    expect(s.events.findLast((e) => e.type === 'error')?.error).toMatchObject({ type: 'authentication_error', code: 'key_expired' });
    expect((await credits(management)).open_holds).toBe(0);
  }, 60_000);
});
