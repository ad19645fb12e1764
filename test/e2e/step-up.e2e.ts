import { CATALOG_NOTICES_STREAM, catalogNoticesDecider } from '@svc/catalog';
import { ManualClock } from '@svc/platform';
import { startSmtpServer, type TestSmtpServer } from '@svc/platform/testing/smtp-server';
import { api, startGateway, stopGateway, type Call, type StartedGateway } from '../support/gateway';

const EMAIL = 'owner@example.com';

/**
 * Email step-up (spec 1, 8) through a real SMTP server started here: the code arrives, works
 * once for its action, fails after 15 minutes on the gateway's clock and after 5 wrong tries.
 */
describe('email step-up (spec 1, 8)', () => {
  const clock = new ManualClock(new Date());
  let smtp: TestSmtpServer;
  let gw: StartedGateway;
  let call: Call;
  let management: string;

  beforeAll(async () => {
    smtp = await startSmtpServer();
    gw = await startGateway({ SVC_SMTP_URL: smtp.url, SVC_MAIL_FROM: 'svc-gateway <security@svc.test>' }, undefined, { clock });
    call = api(gw.url);
    management = gw.keys.management_key;
  }, 60_000);
  afterAll(async () => {
    await stopGateway(gw);
    await smtp.close();
  });

  const keyCount = async () => (await call('GET', '/keys', { key: management })).json.data.length as number;
  const codeFor = async (action: string) => {
    const r = await call('POST', '/step-up/codes', { key: management, body: { action } });
    expect(r.status).toBe(201);
    expect(r.json.data).toMatchObject({ action, sent_to: 'o***@example.com' });
    const mail = await smtp.waitFor(EMAIL);
    expect(mail.from?.text).toContain('security@svc.test');
    const code = /\b(\d{6})\b/.exec(mail.text ?? '')?.[1];
    expect(code).toBeDefined();
    // Subjects show in notifications and in the development mailbox's log line: never the code.
    expect(mail.subject).not.toContain(code);
    return code!;
  };
  const createKey = (code?: string, body: object = { name: 'guarded' }) =>
    call('POST', '/keys', { key: management, body, headers: code === undefined ? {} : { 'x-svc-step-up-code': code } });

  it('is off by default: no code needed, and none can be asked for', async () => {
    expect((await createKey()).status).toBe(201);
    const r = await call('POST', '/step-up/codes', { key: management, body: { action: 'create_key' } });
    expect(r.status).toBe(400);
    expect(r.json.error.code).toBe('step_up_not_enabled');
  });

  it('once on, a sensitive action without a code is refused with 403 step_up_required and changes nothing', async () => {
    expect((await call('PATCH', '/settings', { key: management, body: { step_up: { enabled: true, email: EMAIL } } })).status).toBe(200);
    const before = await keyCount();
    const r = await createKey();
    expect(r.status).toBe(403);
    expect(r.json.error).toMatchObject({ type: 'permission_error', code: 'step_up_required' });
    expect(await keyCount()).toBe(before);
  });

  it('the mailed code works once, for its action only', async () => {
    const code = await codeFor('create_key');
    const before = await keyCount();
    expect((await createKey(code)).status).toBe(201);
    expect(await keyCount()).toBe(before + 1);
    const again = await createKey(code);
    expect(again.status).toBe(403);
    expect(again.json.error.code).toBe('step_up_invalid');

    const rotateCode = await codeFor('rotate_key');
    const wrongAction = await createKey(rotateCode);
    expect(wrongAction.json.error.code).toBe('step_up_invalid');
    const keyId = (await call('GET', '/keys', { key: management })).json.data.find((k: { name: string }) => k.name === 'guarded').id;
    const rotated = await call('POST', `/keys/${keyId}/rotate`, { key: management, body: {}, headers: { 'x-svc-step-up-code': rotateCode } });
    expect(rotated.status).toBe(200);
    expect(await keyCount()).toBe(before + 1);
  });

  it('granting the management scope needs a grant_management code, not a create_key one', async () => {
    const code = await codeFor('create_key');
    const r = await createKey(code, { name: 'admin', scope: 'management' });
    expect(r.json.error.code).toBe('step_up_invalid');
    expect(r.status).toBe(403);
    const grant = await codeFor('grant_management');
    expect((await createKey(grant, { name: 'admin', scope: 'management' })).status).toBe(201);
  });

  it('expires after 15 minutes on the clock', async () => {
    const code = await codeFor('create_key');
    clock.advance(15 * 60_000);
    const r = await createKey(code);
    expect(r.status).toBe(403);
    expect(r.json.error.code).toBe('step_up_expired');
  });

  it('after 5 wrong tries the right code fails too', async () => {
    const code = await codeFor('create_key');
    const wrong = code === '000000' ? '000001' : '000000';
    for (let i = 0; i < 5; i++) expect((await createKey(wrong)).json.error.code).toBe('step_up_invalid');
    const before = await keyCount();
    const r = await createKey(code);
    expect(r.json.error.code).toBe('step_up_invalid');
    expect(await keyCount()).toBe(before);
  });

  it('guards saving a webhook and changing step-up itself', async () => {
    const save = await call('PUT', '/settings/webhook', { key: management, body: { url: 'https://93.184.216.34/hook' } });
    expect(save.json.error.code).toBe('step_up_required');
    const off = await call('PATCH', '/settings', { key: management, body: { step_up: { enabled: false } } });
    expect(off.json.error.code).toBe('step_up_required');
    expect((await call('GET', '/settings', { key: management })).json.data.step_up.enabled).toBe(true);
    const code = await codeFor('change_step_up');
    const turnedOff = await call('PATCH', '/settings', { key: management, body: { step_up: { enabled: false } }, headers: { 'x-svc-step-up-code': code } });
    expect(turnedOff.status).toBe(200);
    expect(turnedOff.json.data.step_up.enabled).toBe(false);
    const audit = (await call('GET', '/audit-log?action=settings.step_up_set', { key: management })).json.data;
    expect(audit.length).toBe(2);
  });

  it('notices (spec 9): a deprecation of a model the account used is listed in /v1/notices and mailed to the step-up address', async () => {
    expect(
      (await call('POST', '/chat/completions', { key: gw.keys.api_key, body: { model: 'sim/echo', messages: [{ role: 'user', content: 'hi' }] } })).status,
    ).toBe(200);
    const deadline = Date.now() + 10_000;
    while ((await gw.runtime.sql.query('SELECT 1 FROM webhook_model_use WHERE account_id = $1', [gw.keys.account_id])).rows.length === 0) {
      if (Date.now() > deadline) throw new Error('model use not projected');
      await new Promise((r) => setTimeout(r, 50));
    }
    const sunset = new Date(clock.now().getTime() + 40 * 24 * 3600_000);
    await gw.runtime.aggregates.handle(
      catalogNoticesDecider,
      CATALOG_NOTICES_STREAM,
      {
        type: 'RecordDeprecationNotices',
        due: [{ id: 'sim/echo:announced:step-up-test', kind: 'announced', model: 'sim/echo', name: 'Echo', sunset, replacement: 'sim/claude-echo' }],
      },
      { actor: 'catalog' },
    );
    const mail = await smtp.waitFor(EMAIL, 10_000);
    expect(mail.subject).toBe(`Echo will be retired on ${sunset.toISOString().slice(0, 10)}`);
    expect(mail.text).toContain('sim/claude-echo');
    const notices = (await call('GET', '/notices', { key: gw.keys.api_key })).json;
    expect(notices.data).toEqual([
      {
        id: expect.stringMatching(/^ntc_/),
        type: 'model.deprecated',
        title: mail.subject,
        message: expect.stringContaining('Echo (sim/echo)'),
        data: expect.objectContaining({ model: 'sim/echo', replacement: 'sim/claude-echo' }),
        created: expect.any(Number),
      },
    ]);
    // Mailed once, however many passes run.
    await gw.background.notices.runOnce();
    await new Promise((r) => setTimeout(r, 1500));
    expect(smtp.messages.filter((m) => m.subject === mail.subject)).toHaveLength(1);
  });

  describe('bad input: 400 naming the field, nothing sent or changed', () => {
    it('a 7-digit code', async () => {
      const before = await keyCount();
      const r = await createKey('1234567');
      expect(r.status).toBe(400);
      expect(r.json.error.param).toBe('X-Svc-Step-Up-Code');
      expect(await keyCount()).toBe(before);
    });

    it('an unknown action', async () => {
      const sent = smtp.messages.length;
      const r = await call('POST', '/step-up/codes', { key: management, body: { action: 'delete_everything' } });
      expect(r.status).toBe(400);
      expect(r.json.error.param).toBe('action');
      expect(smtp.messages.length).toBe(sent);
    });
  });
});
