import OpenAI from 'openai';
import { OpenAIRealtimeWS } from 'openai/realtime/ws';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, fetch as undiciFetch } from 'undici';
import WebSocket from 'ws';
import { auditFindings, runLedgerAudit } from '@svc/ledger';
import { costOfMeters } from '@svc/metering';
import { ManualClock, nanoToUsd, usdToNano } from '@svc/platform';
import { EMPTY_TALLY, responseWorstCase, tallyClientEvent, tallyServerEvent, type ConversationTally } from '@svc/realtime';
import { startGateway, stopGateway, type StartedGateway } from '../support/gateway';
import { SLOT_LEASE, type SlotLeases } from '@svc/platform';
import { until } from '../support/until';

/**
 * Issue 20, spec 4.16: GET /v1/realtime over TLS, relayed to the simulated upstream's realtime
 * model, each response held and settled through the metering pipeline. Everything is real: the
 * gateway with its TLS certificate, the simulator, the official SDK's OpenAIRealtimeWS.
 */
const ADMIN_TOKEN = 'admin-token-for-realtime-tests';
const dir = mkdtempSync(join(tmpdir(), 'svc-realtime-'));
const certPath = join(dir, 'cert.pem');
const keyPath = join(dir, 'key.pem');
execFileSync(
  '/usr/bin/openssl',
  [
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-keyout',
    keyPath,
    '-out',
    certPath,
    '-days',
    '1',
    '-subj',
    '/CN=localhost',
    '-addext',
    'subjectAltName=DNS:localhost,IP:127.0.0.1',
  ],
  { stdio: 'ignore' },
);
const ca = readFileSync(certPath);
const agent = new Agent({ connect: { ca } });

type Ev = Record<string, any>;

let gw: StartedGateway;
let port: number;
const clock = new ManualClock(new Date('2026-11-07T12:00:00Z'));

beforeAll(async () => {
  gw = await startGateway(
    { SVC_TLS_CERT: certPath, SVC_TLS_KEY: keyPath, SVC_ADMIN_TOKEN: ADMIN_TOKEN, SVC_RATE_LIMITS_TEST: 'rpm=1000000,tpm=1000000000,concurrent=8' },
    undefined,
    { clock },
  );
  port = Number(new URL(gw.url).port);
}, 60_000);

afterAll(async () => {
  await stopGateway(gw);
  await agent.close();
  rmSync(dir, { recursive: true, force: true });
});

async function http(method: string, path: string, { key, body, admin }: { key?: string; body?: unknown; admin?: boolean } = {}) {
  const headers: Record<string, string> = {};
  if (key) headers.authorization = `Bearer ${key}`;
  if (admin) headers.authorization = `Bearer ${ADMIN_TOKEN}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await undiciFetch(`https://localhost:${port}${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    dispatcher: agent,
  });
  return { status: res.status, json: (await res.json()) as any };
}

async function accountWithKey(credits: number, keySettings: object = {}): Promise<{ accountId: string; key: string }> {
  const account = await http('POST', '/admin/accounts', { admin: true, body: { initial_credits_usd: credits } });
  expect(account.status).toBe(201);
  const key = await http('POST', `/admin/accounts/${account.json.id}/keys`, { admin: true, body: keySettings });
  expect(key.status).toBe(201);
  return { accountId: account.json.id, key: key.json.key };
}

const credits = async (key: string) => (await http('GET', '/v1/credits', { key })).json.data as { balance: number; held: number; open_holds: number };
const nano = (usd: number) => usdToNano(String(usd));

/** A raw WebSocket client (the `ws` package, as a browser's or a server's client would be). */
class Client {
  readonly events: Ev[] = [];
  readonly closed: Promise<{ code: number; reason: string }>;
  private constructor(readonly ws: WebSocket) {
    ws.on('message', (data) => this.events.push(JSON.parse(data.toString())));
    this.closed = new Promise((resolve) => ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })));
  }

  static open(opts: { key?: string; protocols?: string[]; origin?: string; model?: string }): Promise<Client> {
    const headers: Record<string, string> = opts.key ? { authorization: `Bearer ${opts.key}` } : {};
    const ws = new WebSocket(`wss://localhost:${port}/v1/realtime?model=${encodeURIComponent(opts.model ?? 'sim/realtime')}`, opts.protocols ?? [], {
      ca,
      headers,
      origin: opts.origin,
    });
    return new Promise((resolve, reject) => {
      ws.once('open', () => resolve(new Client(ws)));
      ws.once('unexpected-response', (_req, res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c.toString()));
        res.on('end', () => reject(Object.assign(new Error(`HTTP ${res.statusCode}`), { status: res.statusCode, body: JSON.parse(body) })));
      });
      ws.once('error', reject);
    });
  }

  static async refused(opts: Parameters<typeof Client.open>[0]): Promise<{ status: number; body: any }> {
    try {
      const c = await Client.open(opts);
      c.ws.close();
    } catch (err) {
      return err as { status: number; body: any };
    }
    throw new Error('the upgrade was accepted');
  }

  send(event: Ev): void {
    this.ws.send(JSON.stringify(event));
  }

  /** The next event of `type` (and matching `pred`) after the first `from` events. */
  next(type: string, from = 0, pred: (e: Ev) => boolean = () => true): Promise<Ev> {
    return until(`a ${type} event`, () => this.events.slice(from).find((e) => e.type === type && pred(e)), 15_000, 5);
  }

  /** One user turn and its response: the response.done. */
  async turn(text: string, response: Ev = {}): Promise<Ev> {
    const from = this.events.length;
    this.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text }] } });
    this.send({ type: 'response.create', response });
    return this.next('response.done', from);
  }
}

describe('realtime over TLS with the official SDK (spec 4.16)', () => {
  it('relays a session, bills each response by the usage reported, and names its generation', async () => {
    const { key } = await accountWithKey(5);
    const before = await credits(key);
    const client = new OpenAI({ baseURL: `https://localhost:${port}/v1`, apiKey: key, maxRetries: 0 });
    const rt = new OpenAIRealtimeWS({ model: 'sim/realtime', options: { ca } }, client);
    const events: Ev[] = [];
    rt.on('event', (e) => events.push(e as Ev));
    rt.on('error', (err) => events.push({ type: 'sdk_error', err }));
    await new Promise<void>((resolve, reject) => {
      rt.socket.once('open', () => resolve());
      rt.socket.once('error', reject);
    });
    const next = (type: string, from: number) => until(type, () => events.slice(from).find((e) => e.type === type), 15_000, 5);

    rt.send({ type: 'session.update', session: { type: 'realtime', instructions: 'Answer briefly.' } });
    await next('session.updated', 0);
    const dones: Ev[] = [];
    for (const text of ['Hello, realtime', 'And once more']) {
      const from = events.length;
      rt.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text }] } });
      rt.send({ type: 'response.create' });
      const done = await next('response.done', from);
      const created = events.slice(from).find((e) => e.type === 'response.created')!;
      expect(events.slice(from).some((e) => e.type === 'response.output_audio.delta')).toBe(true);
      expect(done.response.status).toBe('completed');
      expect(done.generation_id).toMatch(/^gen-/);
      expect(created.generation_id).toBe(done.generation_id);
      dones.push(done);
    }
    rt.close();
    expect(events.filter((e) => e.type === 'sdk_error')).toEqual([]);

    let sum = 0n;
    for (const done of dones) {
      const g = await http('GET', `/v1/generation?id=${done.generation_id}`, { key });
      expect(g.status).toBe(200);
      expect(g.json.data).toMatchObject({ model: 'sim/realtime', endpoint: '/v1/realtime', total_cost: done.response.usage.cost });
      const u = done.response.usage;
      expect(g.json.data.usage_by_meter).toMatchObject({ audio_output: u.output_token_details.audio_tokens, output: u.output_token_details.text_tokens });
      expect(g.json.data.total_cost).toBeGreaterThan(0);
      sum += nano(g.json.data.total_cost);
    }
    const after = await until('no hold left', async () => {
      const c = await credits(key);
      return c.open_holds === 0 ? c : null;
    });
    expect(nano(before.balance) - nano(after.balance)).toBe(sum);
    expect(after.held).toBe(0);
    // The session the simulator saw: the upstream model id, the gateway's own key.
    const upstream = gw.runtime.simulator!.realtime.sessions.at(-1)!;
    expect(upstream.model).toBe('sim-realtime');
    expect(upstream.key).not.toBe(key);
  });
});

describe('browser subprotocol (spec 5 rule 7)', () => {
  it('accepts a domain-restricted key from a matching Origin, selecting only `realtime`', async () => {
    const { key } = await accountWithKey(1, { allowed_referrers: ['app.example.com'] });
    const c = await Client.open({ protocols: ['realtime', `svc-insecure-api-key.${key}`], origin: 'https://app.example.com' });
    expect(c.ws.protocol).toBe('realtime');
    await c.next('session.created');
    c.ws.close();
  });

  it('refuses another Origin, or a key restricted to no domain, before the upgrade', async () => {
    const { key } = await accountWithKey(1, { allowed_referrers: ['app.example.com'] });
    const wrong = await Client.refused({ protocols: ['realtime', `svc-insecure-api-key.${key}`], origin: 'https://evil.example.org' });
    expect(wrong.status).toBe(403);
    expect(wrong.body.error).toMatchObject({ type: 'permission_error', code: 'referrer_not_allowed' });
    const { key: open } = await accountWithKey(1);
    const unrestricted = await Client.refused({ protocols: ['realtime', `svc-insecure-api-key.${open}`], origin: 'https://app.example.com' });
    expect(unrestricted.status).toBe(403);
    expect(unrestricted.body.error).toMatchObject({ type: 'permission_error', code: 'browser_key_not_restricted' });
  });
});

/** Handshakes counted in the request metrics (issue 22), by status: Fastify never sees them. */
async function handshakes(): Promise<Record<string, number>> {
  const counted: Record<string, number> = {};
  for (const { labels, value } of (await gw.runtime.metrics.httpRequests.get()).values) {
    if (labels.route === '/v1/realtime' && labels.method === 'GET') counted[String(labels.status)] = (counted[String(labels.status)] ?? 0) + value;
  }
  return counted;
}

describe('refusals before the upgrade', () => {
  it('no key: 401; an unknown model: 404; a model of another type: 400; a management key: 403', async () => {
    const before = await handshakes();
    const noKey = await Client.refused({});
    expect(noKey.status).toBe(401);
    expect(noKey.body.error).toMatchObject({ type: 'authentication_error' });
    const unknown = await Client.refused({ key: gw.keys.api_key, model: 'sim/nope' });
    expect(unknown.status).toBe(404);
    expect(unknown.body.error).toMatchObject({ type: 'not_found_error', code: 'model_not_found', param: 'model' });
    const chat = await Client.refused({ key: gw.keys.api_key, model: 'sim/echo' });
    expect(chat.status).toBe(400);
    expect(chat.body.error.type).toBe('invalid_request_error');
    const management = await Client.refused({ key: gw.keys.management_key });
    expect(management.status).toBe(403);
    // Each counted once, by its status; and an accepted session as 101.
    const client = await Client.open({ key: gw.keys.api_key });
    client.ws.close();
    await client.closed;
    const after = await handshakes();
    for (const status of ['401', '404', '400', '403', '101']) expect([status, (after[status] ?? 0) - (before[status] ?? 0)]).toEqual([status, 1]);
  });
});

describe('bad input (WIRE-FORMATS 3.2)', () => {
  it('answers malformed JSON, an unknown type, an oversized append and a foreign transcription model with error events, and goes on', async () => {
    const c = await Client.open({ key: gw.keys.api_key, protocols: ['realtime'] });
    await c.next('session.created');
    const upstream = gw.runtime.simulator!.realtime.sessions.at(-1)!;
    c.ws.send('{"type": "session.update", ');
    const bad = await c.next('error');
    expect(bad.error).toMatchObject({ type: 'invalid_request_error', code: 'invalid_json' });
    let from = c.events.length;
    c.send({ type: 'response.explode', event_id: 'evt_unknown' });
    expect((await c.next('error', from)).error).toMatchObject({ code: 'invalid_value', param: 'type', event_id: 'evt_unknown' });
    from = c.events.length;
    c.send({ type: 'input_audio_buffer.append', event_id: 'evt_big', audio: 'A'.repeat(15 * 1024 * 1024 + 4) });
    expect((await c.next('error', from)).error).toMatchObject({ code: 'audio_too_large', event_id: 'evt_big' });
    from = c.events.length;
    c.ws.send(Buffer.from([0, 1, 2]), { binary: true });
    expect((await c.next('error', from)).error).toMatchObject({ code: 'invalid_json' });
    from = c.events.length;
    c.send({ type: 'session.update', event_id: 'evt_tx', session: { type: 'realtime', audio: { input: { transcription: { model: 'whisper-1' } } } } });
    expect((await c.next('error', from)).error).toMatchObject({ param: 'session.audio.input.transcription.model', event_id: 'evt_tx' });

    const done = await c.turn('Still there?');
    expect(done.response.status).toBe('completed');
    // None of the refused frames reached the upstream.
    expect(upstream.received.map((e: any) => e?.type)).toEqual(['conversation.item.create', 'response.create']);
    c.ws.close();
  });

  it('rewrites a permitted transcription model to its upstream id', async () => {
    const c = await Client.open({ key: gw.keys.api_key });
    await c.next('session.created');
    c.send({ type: 'session.update', session: { type: 'realtime', audio: { input: { transcription: { model: 'sim/transcribe' } } } } });
    const updated = await c.next('session.updated');
    expect(updated.session.audio.input.transcription.model).toBe('gpt-4o-transcribe');
    c.ws.close();
  });
});

describe('input transcription (spec 4.16)', () => {
  it("is a billed call of its own at the transcription model's price", async () => {
    const { key } = await accountWithKey(1);
    const c = await Client.open({ key });
    await c.next('session.created');
    c.send({ type: 'session.update', session: { type: 'realtime', audio: { input: { transcription: { model: 'sim/transcribe' } } } } });
    await c.next('session.updated');
    const audio = Buffer.concat([Buffer.from('#sim-text hello there\n'), Buffer.alloc(48_000)]);
    c.send({ type: 'input_audio_buffer.append', audio: audio.toString('base64') });
    c.send({ type: 'input_audio_buffer.commit' });
    const done = await c.next('conversation.item.input_audio_transcription.completed');
    expect(done.generation_id).toMatch(/^gen-/);
    expect(done.cost).toBeGreaterThan(0);
    const g = await http('GET', `/v1/generation?id=${done.generation_id}`, { key });
    expect(g.json.data).toMatchObject({ model: 'sim/transcribe', endpoint: '/v1/realtime', total_cost: done.cost });
    c.ws.close();
  });
});

describe('a failed response (spec 1 rule 3)', () => {
  it('is free', async () => {
    const { key } = await accountWithKey(1);
    const c = await Client.open({ key });
    await c.next('session.created');
    const done = await c.turn('#sim {"fail": true}\nHello');
    expect(done.response.status).toBe('failed');
    expect(done.generation_id).toMatch(/^gen-/);
    c.ws.close();
    const after = await until('the hold released', async () => {
      const cr = await credits(key);
      return cr.open_holds === 0 ? cr : null;
    });
    expect(after.balance).toBe(1);
    const g = await http('GET', `/v1/generation?id=${done.generation_id}`, { key });
    expect(g.json.data.total_cost).toBe(0);
  });
});

describe('exhaustion (spec 3.3, 6.2)', () => {
  const realtimePrices = () => gw.runtime.catalog.get('sim/realtime')!.providers[0].prices;
  const script = ['First question', 'Second question', 'Third question'];
  const MAX = 40;

  /** Runs the script; returns the dones, and the tally the gateway keeps before each response. */
  async function run(c: Client, turns: number) {
    c.send({ type: 'session.update', session: { type: 'realtime', max_output_tokens: MAX } });
    const created = await c.next('session.created');
    const updated = await c.next('session.updated');
    let tally: ConversationTally = tallyServerEvent(
      tallyServerEvent(tallyClientEvent(EMPTY_TALLY, { type: 'session.update', session: { max_output_tokens: MAX } }), created),
      updated,
    );
    const holds: bigint[] = [];
    const dones: Ev[] = [];
    for (const text of script.slice(0, turns)) {
      const item = { type: 'message', role: 'user', content: [{ type: 'input_text', text }] };
      tally = tallyClientEvent(tally, { type: 'conversation.item.create', item });
      holds.push(costOfMeters(responseWorstCase(tally, { type: 'response.create' }, realtimePrices()), realtimePrices()));
      const done = await c.turn(text);
      dones.push(done);
      tally = tallyServerEvent(tally, done);
    }
    return { dones, holds };
  }

  it('answers the response.create it cannot hold with an error event and close 1008, never overdrawing', async () => {
    // Calibration on a rich account: what each response costs, and what the third holds.
    const rich = await Client.open({ key: (await accountWithKey(10)).key });
    const calibration = await run(rich, 3);
    rich.ws.close();
    const [c1, c2] = calibration.dones.map((d) => nano(d.response.usage.cost));
    const [h1, h2, h3] = calibration.holds;
    // Each hold covers what its response was charged (spec 1 rule 1).
    calibration.dones.forEach((d, i) => expect(nano(d.response.usage.cost)).toBeLessThanOrEqual(calibration.holds[i]));
    const affordable = c1 + c2 + h3 - 1n;
    expect(h1).toBeLessThanOrEqual(affordable);
    expect(c1 + h2).toBeLessThanOrEqual(affordable);

    const { accountId, key } = await accountWithKey(nanoToUsd(affordable));
    expect(nano((await credits(key)).balance)).toBe(affordable);
    const c = await Client.open({ key });
    const { dones } = await run(c, 2);
    expect(dones.map((d) => nano(d.response.usage.cost))).toEqual([c1, c2]);
    const sent = gw.runtime.simulator!.realtime.sessions.at(-1)!;
    const from = c.events.length;
    c.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: script[2] }] } });
    c.send({ type: 'response.create', event_id: 'evt_third' });
    const error = await c.next('error', from);
    expect(error.error).toMatchObject({ type: 'insufficient_quota', code: 'insufficient_quota', event_id: 'evt_third' });
    expect((await c.closed).code).toBe(1008);
    // The third response.create never reached the upstream.
    expect(sent.received.filter((e: any) => e?.type === 'response.create')).toHaveLength(2);

    const after = await until('no hold left', async () => {
      const cr = await credits(key);
      return cr.open_holds === 0 ? cr : null;
    });
    expect(nano(after.balance)).toBe(h3 - 1n);
    expect(after.balance).toBeGreaterThanOrEqual(0);
    const report = await runLedgerAudit(gw.runtime.store, gw.runtime.sql, { account: accountId });
    expect(auditFindings(report)).toBe(0);
  });

  it("answers the response.create the key's spend limit cannot hold the same way (spec 2.2, 3.3), with the account's balance to spare", async () => {
    const rich = await Client.open({ key: (await accountWithKey(10)).key });
    const calibration = await run(rich, 2);
    rich.ws.close();
    const c1 = nano(calibration.dones[0].response.usage.cost);
    const h2 = calibration.holds[1];
    // A key limit one nano short of the second response's hold on top of the first's charge.
    const limit = c1 + h2 - 1n;
    const { accountId, key } = await accountWithKey(10, { limit: nanoToUsd(limit), limit_reset: 'never' });
    const c = await Client.open({ key });
    const { dones } = await run(c, 1);
    expect(nano(dones[0].response.usage.cost)).toBe(c1);
    const from = c.events.length;
    c.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: script[1] }] } });
    c.send({ type: 'response.create', event_id: 'evt_capped' });
    const error = await c.next('error', from);
    expect(error.error).toMatchObject({ event_id: 'evt_capped' });
    expect(error.error.code).toMatch(/^(key_limit_reached|\w+_spend_cap_reached)$/);
    expect((await c.closed).code).toBe(1008);
    const after = await until('no hold left', async () => {
      const cr = await credits(key);
      return cr.open_holds === 0 ? cr : null;
    });
    expect(10 - after.balance).toBeCloseTo(nanoToUsd(c1), 9);
    const report = await runLedgerAudit(gw.runtime.store, gw.runtime.sql, { account: accountId });
    expect(auditFindings(report)).toBe(0);
  });
});

describe('a client gone mid-response (spec 1 rule 4)', () => {
  it('is still billed: the upstream stays open until the response is done, and it settles', async () => {
    const { key } = await accountWithKey(1);
    const c = await Client.open({ key });
    await c.next('session.created');
    c.send({
      type: 'conversation.item.create',
      item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: '#sim {"chunk_delay_ms": 150}\nTell me a long story about the sea' }] },
    });
    c.send({ type: 'response.create' });
    const created = await c.next('response.created');
    const generationId = created.generation_id as string;
    expect(generationId).toMatch(/^gen-/);
    await c.next('response.output_audio.delta');
    c.ws.close();
    await c.closed;
    const g = await until(
      'the response settled',
      async () => {
        const r = await http('GET', `/v1/generation?id=${generationId}`, { key });
        return r.json.data?.status === 'completed' ? r.json.data : null;
      },
      15_000,
    );
    expect(g.total_cost).toBeGreaterThan(0);
    expect(g.usage_by_meter.audio_output).toBeGreaterThan(0);
    const after = await credits(key);
    expect(after.open_holds).toBe(0);
    expect(nano(1) - nano(after.balance)).toBe(nano(g.total_cost));
  });
});

describe('session limits on the injected clock (spec 3.3, 8)', () => {
  it('closes after 10 idle minutes, with an error event then close 1000', async () => {
    const c = await Client.open({ key: gw.keys.api_key });
    await c.next('session.created');
    clock.advance(10 * 60_000);
    const error = await c.next('error');
    expect(error.error).toMatchObject({ code: 'session_idle_timeout' });
    expect(await c.closed).toEqual({ code: 1000, reason: 'session_idle_timeout' });
  });

  it('closes after 60 minutes however active', async () => {
    const c = await Client.open({ key: gw.keys.api_key });
    await c.next('session.created');
    for (let minutes = 9; minutes <= 54; minutes += 9) {
      clock.advance(9 * 60_000);
      const from = c.events.length;
      c.send({ type: 'session.update', session: { type: 'realtime', instructions: `at ${minutes} minutes` } });
      await c.next('session.updated', from);
    }
    expect(c.ws.readyState).toBe(WebSocket.OPEN);
    clock.advance(6 * 60_000);
    expect((await c.next('error')).error).toMatchObject({ code: 'session_expired' });
    expect((await c.closed).code).toBe(1000);
  });
});

describe('concurrency (spec 8)', () => {
  it("a session holds one concurrency slot for its whole life, past an HTTP call's lease, and gives it back when it ends", async () => {
    // A test key: 8 at once here (the gateway's SVC_RATE_LIMITS_TEST, as by default).
    const { key } = await accountWithKey(5, { environment: 'test' });
    expect((await http('GET', '/v1/key', { key })).json.data.rate_limit.concurrent_requests).toBe(8);
    const open = await Promise.all(Array.from({ length: 8 }, () => Client.open({ key })));
    // An HTTP call's slot would have freed itself by now (upstream timeout plus a minute). Time
    // passes as the process lives it: its slots renewed every renewal interval (issue 41 E).
    const { leases } = gw.runtime.edge.concurrency as unknown as { leases: SlotLeases };
    for (let passed = 0; passed < 5 * 60_000; passed += SLOT_LEASE.renewMs) {
      clock.advance(SLOT_LEASE.renewMs);
      await leases.renew();
    }
    for (const c of open) c.send({ type: 'input_audio_buffer.clear' });
    const ninth = await Client.refused({ key });
    expect(ninth.status).toBe(429);
    expect(ninth.body.error).toMatchObject({ type: 'rate_limit_error', code: 'concurrent_requests_limit_exceeded' });
    open[0].ws.close();
    await open[0].closed;
    const again = await until('a free slot', async () => (await Client.open({ key }).catch(() => null)) ?? undefined, 10_000, 50);
    for (const c of [again, ...open.slice(1)]) c.ws.close();
    await Promise.all([again, ...open.slice(1)].map((c) => c.closed));
  });
});
