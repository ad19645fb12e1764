import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ManualClock, OutboundClient } from '@svc/platform';
import { webhookDispatcher } from '../../src/background';
import { CATALOG_NOTICES_STREAM, catalogNoticesDecider } from '@svc/catalog';
import { ALL_PROJECTIONS } from '@svc/runtime';
import { RETRY_DELAYS_MS, SIGNATURE_TOLERANCE_SECONDS, verifyWebhookSignature, WEBHOOK_DELIVERY_JOB, WEBHOOK_EVENT_TYPES } from '@svc/webhooks';
import { api, startGateway, stopGateway, type Call, type StartedGateway } from '../support/gateway';
import { until } from '../support/until';

interface Received {
  headers: IncomingMessage['headers'];
  raw: string;
  body: { id: string; type: string; created: number; data: Record<string, unknown> };
}

/** A real HTTP receiver: records every delivery and answers with the next scripted status (200 once the script is spent). */
class Receiver {
  readonly received: Received[] = [];
  script: number[] = [];
  private server!: Server;
  url = '';

  async start(): Promise<void> {
    this.server = createServer((req: IncomingMessage, res: ServerResponse) => {
      let raw = '';
      req.on('data', (c) => (raw += c));
      req.on('end', () => {
        this.received.push({ headers: req.headers, raw, body: JSON.parse(raw) });
        res.writeHead(this.script.shift() ?? 200).end('ok');
      });
    });
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/hook`;
  }

  of(type: string): Received[] {
    return this.received.filter((r) => r.body.type === type);
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/**
 * Waits for `probe`, running dispatch passes of the test's own meanwhile: the background's pass
 * comes once a second, and each step of a schedule would wait for it. The first delivery of the
 * suite is left to the background alone.
 */
function dispatched<T>(gw: StartedGateway, what: string, probe: () => Promise<T | undefined | null | false> | T | undefined | null | false): Promise<T> {
  return until(what, async () => {
    await gw.background.webhooks.runOnce();
    return probe();
  });
}

/**
 * Every event recorded so far in the outbox, then a pass of the test's own, which claims every
 * job due at the clock's time and resolves once their attempts are made: what it did not send
 * was not due.
 */
async function dispatchPass(gw: StartedGateway): Promise<void> {
  await gw.runtime.projections.catchUpAll();
  await gw.background.webhooks.runOnce();
}

/** Until the pass that made the event's last attempt has let its job go: a job still leased is claimed by nobody, due or not. */
function letGo(gw: StartedGateway, eventId: string): Promise<boolean> {
  return until(`the delivery job of ${eventId} let go`, async () => {
    const { rows } = await gw.runtime.sql.query<{ owner: string | null }>('SELECT owner FROM jobs WHERE kind = $1 AND key = $2', [
      WEBHOOK_DELIVERY_JOB,
      eventId,
    ]);
    return rows.length === 1 && rows[0].owner === null;
  });
}

describe('webhooks (spec 6.1, 3.3): settings, signed delivery, retries, pause, redelivery', () => {
  const clock = new ManualClock(new Date());
  const receiver = new Receiver();
  let gw: StartedGateway;
  let call: Call;
  let management: string;
  let secret: string;
  const admin = () => ({ authorization: `Bearer ${gw.keys.admin_token}` });
  const root = () => api(gw.url.replace(/\/v1$/, ''));
  const addCredits = (amount = 1) => root()('POST', `/admin/accounts/${gw.keys.account_id}/credits`, { body: { amount_usd: amount }, headers: admin() });

  beforeAll(async () => {
    await receiver.start();
    gw = await startGateway({ SVC_WEBHOOK_ALLOW_PRIVATE: 'true' }, undefined, { clock });
    call = api(gw.url);
    management = gw.keys.management_key;
  }, 60_000);
  afterAll(async () => {
    await stopGateway(gw);
    await receiver.close();
  });

  it('starts with defaults: logging and step-up off, no webhook', async () => {
    const r = await call('GET', '/settings', { key: management });
    expect(r.status).toBe(200);
    expect(r.json.data).toEqual({ prompt_logging: { enabled: false, retention_days: 30 }, step_up: { enabled: false, email: null }, webhook: null });
  });

  it('is for management keys only (spec 5.6)', async () => {
    const r = await call('GET', '/settings', { key: gw.keys.api_key });
    expect(r.status).toBe(403);
    expect(r.json.error.code).toBe('management_key_required');
  });

  it('saves the endpoint and shows its signing secret once', async () => {
    const first = await call('PUT', '/settings/webhook', { key: management, body: { url: receiver.url } });
    expect(first.status).toBe(200);
    expect(first.json.data).toMatchObject({ id: expect.stringMatching(/^wh_/), url: receiver.url, events: null, paused: false });
    expect(first.json.secret).toMatch(/^whsec_/);
    secret = first.json.secret;

    const again = await call('PUT', '/settings/webhook', { key: management, body: { url: receiver.url, events: null } });
    expect(again.json.data.id).toBe(first.json.data.id);
    expect(again.json.secret).toBeUndefined();
    expect(JSON.stringify((await call('GET', '/settings', { key: management })).json)).not.toContain(secret);
  });

  it('delivers a signed event that verifies with the secret, fresh, with the body as signed', async () => {
    expect((await addCredits(2)).status).toBeLessThan(300);
    const [delivery] = await until('credits.added delivery', () => receiver.of('credits.added').length > 0 && receiver.of('credits.added'));
    expect(delivery.body).toEqual({
      id: expect.stringMatching(/^evt_[0-9a-f]{24}$/),
      type: 'credits.added',
      created: expect.any(Number),
      data: { amount: 2, reason: 'admin' },
    });
    const header = delivery.headers['svc-signature'] as string;
    expect(header).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
    const now = Math.floor(Date.now() / 1000);
    expect(verifyWebhookSignature(header, secret, delivery.raw, now)).toBe(true);
    expect(verifyWebhookSignature(header, 'whsec_wrong', delivery.raw, now)).toBe(false);
    expect(verifyWebhookSignature(header, secret, delivery.raw.replace('"amount":2', '"amount":3'), now)).toBe(false);
    expect(verifyWebhookSignature(header, secret, delivery.raw, now + SIGNATURE_TOLERANCE_SECONDS + 5)).toBe(false);

    const listed = await until('delivered state', async () => {
      const r = await call('GET', `/webhook-events/${delivery.body.id}`, { key: management });
      return r.json.data?.delivery.state === 'delivered' && r.json.data;
    });
    expect(listed.attempts).toEqual([{ attempt: 1, at: expect.any(String), status_code: 200, latency_ms: expect.any(Number), error: null, delivered: true }]);
  });

  it('retries a failing receiver after 30 s and 5 min on the injected clock, with one event id: three attempts', async () => {
    receiver.script = [500, 503];
    const before = receiver.received.length;
    await addCredits(3);
    await dispatched(gw, 'first attempt', () => receiver.received.length === before + 1);
    const id = receiver.received[before].body.id;
    // The clock moves on only once the attempt is recorded: one recorded after the move would be
    // scheduled from the later time, and not be due when the test expects it.
    const recorded = (attempts: number) =>
      until(
        `${attempts} attempts recorded`,
        async () => (await call('GET', `/webhook-events/${id}`, { key: management })).json.data?.attempts?.length === attempts,
      );
    await recorded(1);
    await letGo(gw, id);

    // Not due before 30 s have passed on the gateway's clock.
    await dispatchPass(gw);
    expect(receiver.received.length).toBe(before + 1);
    clock.advance(RETRY_DELAYS_MS[0] - 1000);
    await dispatchPass(gw);
    expect(receiver.received.length).toBe(before + 1);
    clock.advance(1000);
    await dispatched(gw, 'second attempt', () => receiver.received.length === before + 2);
    await recorded(2);

    clock.advance(RETRY_DELAYS_MS[1]);
    await dispatched(gw, 'third attempt', () => receiver.received.length === before + 3);
    expect(receiver.received.slice(before).map((r) => r.body.id)).toEqual([id, id, id]);

    const detail = await until('three attempts recorded', async () => {
      const r = await call('GET', `/webhook-events/${id}`, { key: management });
      return r.json.data?.attempts?.length === 3 && r.json.data;
    });
    expect(detail.attempts.map((a: { status_code: number }) => a.status_code)).toEqual([500, 503, 200]);
    expect(detail.delivery.state).toBe('delivered');
  });

  it('lists events newest first with a cursor', async () => {
    const page1 = await call('GET', '/webhook-events?limit=1', { key: management });
    expect(page1.status).toBe(200);
    expect(page1.json).toMatchObject({ object: 'list', has_more: true });
    expect(page1.json.data).toHaveLength(1);
    const page2 = await call('GET', `/webhook-events?limit=1&after=${page1.json.last_id}`, { key: management });
    expect(page2.json.data[0].id).not.toBe(page1.json.data[0].id);
    expect(page2.json.data[0].created).toBeLessThanOrEqual(page1.json.data[0].created);
  });

  it('pauses after 20 consecutive failures; resume delivers again; redelivery is one more listed attempt', async () => {
    receiver.script = Array(200).fill(500);
    const before = receiver.received.length;
    // Five events of four attempts each: 20 failures, the schedule run on the clock.
    for (let i = 0; i < 5; i++) await addCredits(1);
    await dispatched(gw, 'five first attempts', () => receiver.received.length >= before + 5);
    const ids = [...new Set(receiver.received.slice(before).map((r) => r.body.id as string))];
    expect(ids).toHaveLength(5);
    // The clock moves on only once every attempt of the round is recorded: an attempt recorded
    // after the move would be scheduled from the later time, and miss the next round.
    const recorded = (attempts: number) =>
      until(`${attempts} attempts of each event recorded`, async () => {
        for (const id of ids) if ((await call('GET', `/webhook-events/${id}`, { key: management })).json.data?.attempts?.length !== attempts) return false;
        return true;
      });
    await recorded(1);
    for (const [round, delay] of RETRY_DELAYS_MS.entries()) {
      const seen = receiver.received.length;
      clock.advance(delay);
      await dispatched(gw, 'a round of retries', () => receiver.received.length >= seen + 5);
      await recorded(round + 2);
    }
    const settings = await until('paused', async () => {
      const r = await call('GET', '/settings', { key: management });
      return r.json.data.webhook.paused && r.json.data;
    });
    expect(settings.webhook.consecutive_failures).toBe(20);
    expect(receiver.received.length).toBe(before + 20);

    // Paused: new events are listed, not sent.
    await addCredits(1);
    await dispatchPass(gw);
    expect(receiver.received.length).toBe(before + 20);

    receiver.script = [];
    const resumed = await call('POST', '/settings/webhook/resume', { key: management });
    expect(resumed.status).toBe(200);
    expect(resumed.json.data).toMatchObject({ paused: false, consecutive_failures: 0 });
    await dispatched(gw, 'the queued event after resume', () => receiver.received.length === before + 21);

    // A failed event, redelivered by hand: one more attempt, listed.
    const failedId = receiver.received[before].body.id;
    const failed = await call('GET', `/webhook-events/${failedId}`, { key: management });
    expect(failed.json.data.delivery.state).toBe('failed');
    expect(failed.json.data.attempts).toHaveLength(4);
    const redelivered = await call('POST', `/webhook-events/${failedId}/redeliver`, { key: management });
    expect(redelivered.status).toBe(202);
    await dispatched(gw, 'redelivery', () => receiver.received.length === before + 22);
    expect(receiver.received.at(-1)!.body.id).toBe(failedId);
    const after = await until('redelivery listed', async () => {
      const r = await call('GET', `/webhook-events/${failedId}`, { key: management });
      return r.json.data.attempts.length === 5 && r.json.data;
    });
    expect(after.delivery.state).toBe('delivered');

    const audit = await call('GET', '/audit-log?action=webhook.paused', { key: management });
    expect(audit.json.data).toHaveLength(1);
    expect((await call('GET', '/audit-log?action=webhook.resumed', { key: management })).json.data).toHaveLength(1);
  }, 120_000);

  it('sends only the subscribed types', async () => {
    const saved = await call('PUT', '/settings/webhook', { key: management, body: { url: receiver.url, events: ['key.created'] } });
    expect(saved.json.data.events).toEqual(['key.created']);
    const before = receiver.received.length;
    await addCredits(1);
    const key = await call('POST', '/keys', { key: management, body: { name: 'hooked' } });
    expect(key.status).toBe(201);
    const [created] = await dispatched(gw, 'key.created', () => receiver.of('key.created').length > 0 && receiver.of('key.created'));
    expect(created.body.data).toMatchObject({ key_id: key.json.data.id, name: 'hooked', scope: 'full' });
    await dispatchPass(gw);
    expect(receiver.received.slice(before).map((r) => r.body.type)).toEqual(['key.created']);
  });

  it('rotates the secret: the next delivery verifies with the new one only', async () => {
    const rotated = await call('POST', '/settings/webhook/rotate-secret', { key: management });
    expect(rotated.status).toBe(200);
    expect(rotated.json.secret).toMatch(/^whsec_/);
    expect(rotated.json.secret).not.toBe(secret);
    await call('POST', '/keys', { key: management, body: { name: 'after-rotation' } });
    const delivery = await dispatched(gw, 'delivery after rotation', () => receiver.received.find((r) => r.body.data.name === 'after-rotation'));
    const now = Math.floor(clock.now().getTime() / 1000);
    expect(verifyWebhookSignature(delivery.headers['svc-signature'] as string, rotated.json.secret, delivery.raw, now)).toBe(true);
    expect(verifyWebhookSignature(delivery.headers['svc-signature'] as string, secret, delivery.raw, now)).toBe(false);
  });

  it('key.expiring: 7 days and again 1 day before a key expires, on the injected clock', async () => {
    await call('PUT', '/settings/webhook', { key: management, body: { url: receiver.url, events: ['key.expiring'] } });
    const key = await call('POST', '/keys', { key: management, body: { name: 'short-lived', expires_in_days: 5 } });
    expect(key.status).toBe(201);
    const expiring = () => receiver.of('key.expiring').filter((r) => r.body.data.key_id === key.json.data.id);

    expect(await gw.background.recordKeyExpiryNotices()).toBeGreaterThanOrEqual(1);
    const [week] = await dispatched(gw, 'the 7-day notice', () => expiring().length === 1 && expiring());
    expect(week.body.data).toEqual({ key_id: key.json.data.id, expires_at: key.json.data.expires_at, days_before: 7 });
    // Looked at again: nothing new.
    await gw.background.recordKeyExpiryNotices();
    clock.advance(3 * 24 * 3600_000);
    await gw.background.recordKeyExpiryNotices();
    await dispatchPass(gw);
    expect(expiring()).toHaveLength(1);

    clock.advance(1.5 * 24 * 3600_000);
    await gw.background.recordKeyExpiryNotices();
    const both = await dispatched(gw, 'the 1-day notice', () => expiring().length === 2 && expiring());
    expect(both[1].body.data.days_before).toBe(1);
  });

  it('model.deprecated: to the accounts that used the model in the last 30 days, once per notice', async () => {
    await call('PUT', '/settings/webhook', { key: management, body: { url: receiver.url, events: ['model.deprecated'] } });
    const chat = await call('POST', '/chat/completions', { key: gw.keys.api_key, body: { model: 'sim/echo', messages: [{ role: 'user', content: 'hi' }] } });
    expect(chat.status).toBe(200);
    await until(
      'the use of sim/echo projected',
      async () =>
        (await gw.runtime.sql.query('SELECT 1 FROM webhook_model_use WHERE account_id = $1 AND model = $2', [gw.keys.account_id, 'sim/echo'])).rows.length ===
        1,
    );
    const notice = (model: string, kind: 'announced' | 'final') => ({
      id: `${model}:${kind}:test`,
      kind,
      model,
      name: model,
      sunset: new Date(clock.now().getTime() + 40 * 24 * 3600_000),
      replacement: 'sim/echo-2',
    });
    await gw.runtime.aggregates.handle(
      catalogNoticesDecider,
      CATALOG_NOTICES_STREAM,
      { type: 'RecordDeprecationNotices', due: [notice('sim/echo', 'announced'), notice('sim/unused', 'announced')] },
      { actor: 'catalog' },
    );
    const [announced] = await dispatched(gw, 'model.deprecated', () => receiver.of('model.deprecated').length > 0 && receiver.of('model.deprecated'));
    expect(announced.body.data).toMatchObject({ model: 'sim/echo', notice: 'announced', replacement: 'sim/echo-2' });
    await dispatchPass(gw);
    // Nobody used sim/unused; the same notice recorded again is not a new event.
    await gw.runtime.aggregates.handle(
      catalogNoticesDecider,
      CATALOG_NOTICES_STREAM,
      { type: 'RecordDeprecationNotices', due: [notice('sim/echo', 'announced')] },
      { actor: 'catalog' },
    );
    await dispatchPass(gw);
    expect(receiver.of('model.deprecated').map((r) => r.body.data.model)).toEqual(['sim/echo']);
  });

  it('records every settings write in the audit log with actor and time', async () => {
    const patched = await call('PATCH', '/settings', {
      key: management,
      body: { prompt_logging: { enabled: true, retention_days: 7 }, step_up: { enabled: true, email: 'ops@example.com' } },
    });
    expect(patched.status).toBe(200);
    expect(patched.json.data).toMatchObject({ prompt_logging: { enabled: true, retention_days: 7 }, step_up: { enabled: true, email: 'ops@example.com' } });
    const actions = (await call('GET', '/audit-log?limit=1000', { key: management })).json.data.map((e: { action: string }) => e.action);
    for (const action of [
      'settings.prompt_logging_set',
      'settings.step_up_set',
      'webhook.saved',
      'webhook.secret_rotated',
      'webhook.paused',
      'webhook.resumed',
    ])
      expect(actions).toContain(action);
    const entry = (await call('GET', '/audit-log?action=settings.prompt_logging_set', { key: management })).json.data[0];
    expect(entry).toMatchObject({ actor: expect.any(String), at: expect.any(String), details: { enabled: true, retention_days: 7 } });
    // Filtered by time: since is inclusive, until exclusive.
    const at = Date.parse(entry.at);
    const inRange = async (query: string) =>
      (await call('GET', `/audit-log?action=settings.prompt_logging_set&${query}`, { key: management })).json.data.length;
    expect(await inRange(`since=${new Date(at).toISOString()}`)).toBe(1);
    expect(await inRange(`since=${new Date(at + 1).toISOString()}`)).toBe(0);
    expect(await inRange(`until=${new Date(at).toISOString()}`)).toBe(0);
    expect(await inRange(`until=${Math.floor(at / 1000) + 1}`)).toBe(1);
    const bad = await call('GET', '/audit-log?since=yesterday', { key: management });
    expect(bad.status).toBe(400);
    expect(bad.json.error.param).toBe('since');
    expect(JSON.stringify(actions)).not.toContain('whsec_');
    const log = JSON.stringify((await call('GET', '/audit-log?limit=1000', { key: management })).json);
    expect(log).not.toContain(secret);
  });

  it('DELETE removes the endpoint: nothing more is queued or sent, and a second DELETE is 404', async () => {
    const removed = await call('DELETE', '/settings/webhook', { key: management });
    expect(removed.status).toBe(200);
    expect((await call('GET', '/settings', { key: management })).json.data.webhook).toBeNull();
    const listed = (await call('GET', '/webhook-events?limit=100', { key: management })).json.data.length;
    const sent = receiver.received.length;
    await addCredits(1);
    await dispatchPass(gw);
    expect(receiver.received.length).toBe(sent);
    expect((await call('GET', '/webhook-events?limit=100', { key: management })).json.data.length).toBe(listed);
    const again = await call('DELETE', '/settings/webhook', { key: management });
    expect(again.status).toBe(404);
    expect(again.json.error.code).toBe('webhook_not_found');
    expect((await call('GET', '/audit-log?action=webhook.deleted', { key: management })).json.data).toHaveLength(1);
  });

  describe('bad input: 400 naming the field, nothing changed', () => {
    const cases: [string, string, string, unknown, string][] = [
      ['a URL that is not one', 'PUT', '/settings/webhook', { url: 'not a url' }, 'url'],
      ['a URL of another type', 'PUT', '/settings/webhook', { url: 42 }, 'url'],
      ['an unknown event type', 'PUT', '/settings/webhook', { url: 'https://example.com/h', events: ['credits.added', 'key.exploded'] }, 'events[1]'],
      ['events that is not an array', 'PUT', '/settings/webhook', { url: 'https://example.com/h', events: 'key.created' }, 'events'],
      ['retention_days 0', 'PATCH', '/settings', { prompt_logging: { enabled: true, retention_days: 0 } }, 'prompt_logging.retention_days'],
      ['retention_days 31', 'PATCH', '/settings', { prompt_logging: { retention_days: 31 } }, 'prompt_logging.retention_days'],
      ['enabled not a boolean', 'PATCH', '/settings', { prompt_logging: { enabled: 'yes' } }, 'prompt_logging.enabled'],
      ['a step-up address that is not one', 'PATCH', '/settings', { step_up: { enabled: true, email: 'nobody' } }, 'step_up.email'],
      ['an unknown field', 'PATCH', '/settings', { prompt_logging: { enabled: true }, webhooks: {} }, 'webhooks'],
    ];
    it.each(cases)('%s', async (_, method, path, body, param) => {
      const before = (await call('GET', '/settings', { key: management })).json.data;
      const r = await call(method, path, { key: management, body });
      expect(r.status).toBe(400);
      expect(r.json.error).toMatchObject({ type: 'invalid_request_error', param });
      expect((await call('GET', '/settings', { key: management })).json.data).toEqual(before);
    });
  });

  it('rebuilding the new projections from 0 gives the live rows', async () => {
    const tables = ['account_settings', 'webhook_subscriptions', 'webhook_events', 'webhook_attempts', 'webhook_model_use', 'notices'];
    const snapshot = async () =>
      Object.fromEntries(await Promise.all(tables.map(async (t) => [t, (await gw.runtime.sql.query(`SELECT * FROM ${t} ORDER BY 1, 2`)).rows] as const)));
    const live = await snapshot();
    expect(live.webhook_events.length).toBeGreaterThan(5);
    await gw.runtime.projections.rebuild(ALL_PROJECTIONS.filter((p) => ['account_settings', 'notifications'].includes(p.name)).map((p) => p.name));
    expect(await snapshot()).toEqual(live);
  });

  it("knows the 14 event types of spec 6.1 and issue 44's two budget events", () => {
    expect(WEBHOOK_EVENT_TYPES).toHaveLength(16);
    expect(WEBHOOK_EVENT_TYPES).toEqual(expect.arrayContaining(['budget.warning', 'budget.reached', 'key.spend_cap.reached', 'balance.low']));
  });
});

describe('issue 41 item 19: an event belongs to the endpoint it was made for, and delivered stays delivered', () => {
  const clock = new ManualClock(new Date());
  const first = new Receiver();
  const second = new Receiver();
  let gw: StartedGateway;
  let call: Call;
  let management: string;
  const root = () => api(gw.url.replace(/\/v1$/, ''));
  const addCredits = (amount: number) =>
    root()('POST', `/admin/accounts/${gw.keys.account_id}/credits`, {
      body: { amount_usd: amount },
      headers: { authorization: `Bearer ${gw.keys.admin_token}` },
    });
  const eventOf = async (id: string) => (await call('GET', `/webhook-events/${id}`, { key: management })).json.data;

  beforeAll(async () => {
    await first.start();
    await second.start();
    gw = await startGateway({ SVC_WEBHOOK_ALLOW_PRIVATE: 'true' }, undefined, { clock });
    call = api(gw.url);
    management = gw.keys.management_key;
    expect((await call('PUT', '/settings/webhook', { key: management, body: { url: first.url } })).status).toBe(200);
  }, 60_000);
  afterAll(async () => {
    await stopGateway(gw);
    await first.close();
    await second.close();
  });

  it('a failed manual redelivery of a delivered event is one more attempt; the event stays delivered', async () => {
    await addCredits(1);
    const [delivery] = await dispatched(gw, 'delivered', () => first.of('credits.added').length > 0 && first.of('credits.added'));
    const id = delivery.body.id;
    await until('delivered state', async () => (await eventOf(id))?.delivery.state === 'delivered');
    first.script = [500];
    expect((await call('POST', `/webhook-events/${id}/redeliver`, { key: management })).status).toBe(202);
    const after = await dispatched(gw, 'the redelivery recorded', async () => {
      const event = await eventOf(id);
      return event.attempts.length === 2 && event;
    });
    expect(after.attempts.map((a: { status_code: number; delivered: boolean }) => [a.status_code, a.delivered])).toEqual([
      [200, true],
      [500, false],
    ]);
    expect(after.delivery).toMatchObject({ state: 'delivered', next_attempt_at: null });
  });

  it('a retry pending when its endpoint is deleted is cancelled, never sent to the endpoint created next', async () => {
    first.script = [503];
    const before = first.received.length;
    await addCredits(2);
    await dispatched(gw, 'the first attempt fails', () => first.received.length === before + 1);
    const id = first.received[before].body.id;
    await until('a retry scheduled', async () => (await eventOf(id))?.delivery.next_attempt_at !== null && (await eventOf(id)).attempts.length === 1);
    await letGo(gw, id);

    expect((await call('DELETE', '/settings/webhook', { key: management })).status).toBe(200);
    expect((await call('PUT', '/settings/webhook', { key: management, body: { url: second.url } })).status).toBe(200);
    clock.advance(RETRY_DELAYS_MS[0] + 1000);
    // The new endpoint gets what is made for it, and only that.
    await addCredits(3);
    await dispatched(gw, 'the new endpoint gets its own event', () => second.of('credits.added').length === 1);
    await dispatchPass(gw);
    expect(second.received.map((r) => r.body.id)).not.toContain(id);
    expect(second.received.map((r) => r.body.data.amount)).toEqual([3]);
    expect(first.received.length).toBe(before + 1);
    expect((await eventOf(id)).delivery).toMatchObject({ state: 'cancelled', next_attempt_at: null });
    // Redelivering it by hand does not send it to the new endpoint either.
    expect((await call('POST', `/webhook-events/${id}/redeliver`, { key: management })).status).toBe(202);
    await dispatchPass(gw);
    expect(second.received.map((r) => r.body.id)).not.toContain(id);
  }, 60_000);
});

describe('webhook URL safety (spec 6.1; the outbound guard): refused at save and at connect time', () => {
  let gw: StartedGateway;
  let call: Call;

  beforeAll(async () => {
    gw = await startGateway();
    call = api(gw.url);
  }, 60_000);
  afterAll(() => stopGateway(gw));

  it.each([
    ['loopback', 'https://127.0.0.1/hook'],
    ['a private network', 'https://10.1.2.3/hook'],
    ['the cloud metadata address', 'https://169.254.169.254/latest/meta-data'],
    ['IPv6 loopback', 'https://[::1]/hook'],
    ['IPv4-mapped loopback', 'https://[::ffff:127.0.0.1]/hook'],
    ['a name resolving to loopback', 'https://localhost/hook'],
    ['plain http', 'http://93.184.216.34/hook'],
    ['credentials in the URL', 'https://user:pw@93.184.216.34/hook'],
  ])('refuses %s at save, and changes nothing', async (_, url) => {
    const r = await call('PUT', '/settings/webhook', { key: gw.keys.management_key, body: { url } });
    expect(r.status).toBe(400);
    expect(r.json.error).toMatchObject({ type: 'invalid_request_error', param: 'url', code: 'invalid_webhook_url' });
    expect(r.json.error.message).not.toContain('pw');
    expect((await call('GET', '/settings', { key: gw.keys.management_key })).json.data.webhook).toBeNull();
  });

  it('two first saves at once: one endpoint, and only the answer whose secret was recorded shows one', async () => {
    const body = { url: 'https://93.184.216.34/hook' };
    const answers = await Promise.all([1, 2].map(() => call('PUT', '/settings/webhook', { key: gw.keys.management_key, body })));
    expect(answers.map((a) => a.status)).toEqual([200, 200]);
    expect(answers.filter((a) => typeof a.json.secret === 'string')).toHaveLength(1);
    expect(answers[0].json.data.id).toBe(answers[1].json.data.id);
    expect((await call('DELETE', '/settings/webhook', { key: gw.keys.management_key })).status).toBe(200);
  });

  it('refuses at connect time a name that resolves to a private address when it is used (DNS rebinding)', async () => {
    const hits: string[] = [];
    const server = createServer((req, res) => void (hits.push(req.url ?? ''), res.end()));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as AddressInfo).port;
    // Saved by a development gateway (private targets allowed), then delivered by a dispatcher with the guard on.
    const dev = await startGateway({ SVC_WEBHOOK_ALLOW_PRIVATE: 'true' });
    try {
      const devCall = api(dev.url);
      expect((await devCall('PUT', '/settings/webhook', { key: dev.keys.management_key, body: { url: `https://localhost:${port}/hook` } })).status).toBe(200);
      await dev.background.stop();
      // Only the projections run again, before the credit: a write waits for them before it answers, its whole 5 s timeout when they are stopped.
      dev.runtime.projections.start();
      await root(dev)('POST', `/admin/accounts/${dev.keys.account_id}/credits`, {
        body: { amount_usd: 1 },
        headers: { authorization: `Bearer ${dev.keys.admin_token}` },
      });
      const guarded = new OutboundClient({ allowPrivate: false });
      const dispatcher = webhookDispatcher(dev.runtime, guarded);
      const attempt = await until('a refused attempt', async () => {
        await dispatcher.runOnce();
        const listed = (await devCall('GET', '/webhook-events', { key: dev.keys.management_key })).json.data;
        if (listed.length === 0) return undefined;
        const detail = (await devCall('GET', `/webhook-events/${listed[0].id}`, { key: dev.keys.management_key })).json.data;
        return detail.attempts[0];
      });
      await guarded.close();
      expect(attempt).toMatchObject({ attempt: 1, status_code: null, delivered: false, error: expect.stringContaining('private address') });
      expect(hits).toEqual([]);
    } finally {
      await stopGateway(dev);
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

const root = (gw: StartedGateway) => api(gw.url.replace(/\/v1$/, ''));
