import { createHash } from 'node:crypto';
import { ManualClock } from '@svc/platform';
import { startSmtpServer, type TestSmtpServer } from '@svc/platform/testing/smtp-server';
import { api, startGateway, stopGateway, type Call, type StartedGateway } from '../support/gateway';

/**
 * Issue 41 S2, email step-up (spec 1, 8) against abuse, through a real SMTP server started here:
 * code requests are limited per account (5 every 10 minutes, on the gateway's clock) and per
 * client address (10 a minute), each refusal a 429 with Retry-After and no mail; and a code is
 * stored as an HMAC under the server's key, not a hash anyone can reverse by trying a million codes.
 */
describe('email step-up limits and storage (issue 41 S2)', () => {
  const clock = new ManualClock(new Date());
  let smtp: TestSmtpServer;
  let gw: StartedGateway;
  let call: Call;
  let root: Call;

  beforeAll(async () => {
    smtp = await startSmtpServer();
    gw = await startGateway({ SVC_SMTP_URL: smtp.url, SVC_MAIL_FROM: 'svc-gateway <security@svc.test>' }, undefined, { clock });
    call = api(gw.url);
    root = api(gw.url.replace(/\/v1$/, ''));
  }, 60_000);
  afterAll(async () => {
    await stopGateway(gw);
    await smtp.close();
  });

  let accounts = 0;
  /** A new account with step-up on, and its management key. */
  async function account(): Promise<{ id: string; management: string; email: string }> {
    const admin = { authorization: `Bearer ${gw.keys.admin_token}` };
    const id = (await root('POST', '/admin/accounts', { headers: admin, body: { initial_credits_usd: 1 } })).json.id as string;
    const management = (await root('POST', `/admin/accounts/${id}/keys`, { headers: admin, body: { scope: 'management' } })).json.key as string;
    const email = `owner${++accounts}@example.com`;
    expect((await call('PATCH', '/settings', { key: management, body: { step_up: { enabled: true, email } } })).status).toBe(200);
    return { id, management, email };
  }
  const ask = (management: string) => call('POST', '/step-up/codes', { key: management, body: { action: 'create_key' } });
  const mailsTo = (email: string) => smtp.messages.filter((m) => m.to && JSON.stringify(m.to).includes(email)).length;

  it('stores the code as an HMAC under the server key: neither the code nor its bare salted hash is in the event store', async () => {
    const { id, management, email } = await account();
    expect((await ask(management)).status).toBe(201);
    const code = /\b(\d{6})\b/.exec((await smtp.waitFor(email)).text ?? '')![1];
    const { rows } = await gw.runtime.sql.query<{ data: { salt: string; code_hash: string; scheme?: string } }>(
      `SELECT data FROM events WHERE stream = $1 AND type = 'StepUpCodeIssued'`,
      [`step-up-${id}`],
    );
    expect(rows).toHaveLength(1);
    const { salt, code_hash, scheme } = rows[0].data;
    expect(JSON.stringify(rows[0].data)).not.toContain(code);
    expect(scheme).toBe('hmac-sha256');
    // What an attacker with a copy of the events would try: every code under the bare salted hash.
    expect(code_hash).not.toBe(createHash('sha256').update(`${salt}:${code}`).digest('hex'));
    // And the code still works, once.
    expect((await call('POST', '/keys', { key: management, body: { name: 'guarded' }, headers: { 'x-svc-step-up-code': code } })).status).toBe(201);
  });

  it('sends at most 5 codes per account every 10 minutes: the 6th is 429 with Retry-After and no mail, on the clock', async () => {
    const { management, email } = await account();
    for (let i = 0; i < 5; i++) {
      expect((await ask(management)).status).toBe(201);
      await smtp.waitFor(email);
    }
    const sixth = await ask(management);
    expect(sixth.status).toBe(429);
    expect(sixth.json.error).toMatchObject({ type: 'rate_limit_error', code: 'step_up_rate_limited' });
    expect(Number(sixth.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(Number(sixth.headers.get('retry-after'))).toBeLessThanOrEqual(600);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(mailsTo(email)).toBe(5);
    clock.advance(10 * 60_000);
    expect((await ask(management)).status).toBe(201);
    await smtp.waitFor(email);
  });

  it('sends at most 10 codes a minute to one client address, across accounts', async () => {
    // Enough accounts that none reaches its own limit of 5 first.
    const three = [await account(), await account(), await account()];
    let sent = 0;
    let refused: Awaited<ReturnType<typeof ask>> | null = null;
    for (let i = 0; i < 12 && !refused; i++) {
      const r = await ask(three[i % 3].management);
      if (r.status === 201) sent++;
      else refused = r;
    }
    // The test's earlier requests this minute count too: at most 10 in all.
    expect(sent).toBeLessThanOrEqual(10);
    expect(refused?.status).toBe(429);
    expect(refused?.json.error).toMatchObject({ type: 'rate_limit_error', code: 'step_up_rate_limited' });
    expect(Number(refused?.headers.get('retry-after'))).toBeGreaterThan(0);
    const before = smtp.messages.length;
    expect((await ask(three[0].management)).status).toBe(429);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(smtp.messages.length).toBe(before);
  });
});
