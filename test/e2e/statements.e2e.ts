import { AggregateStore, SqlEventStore } from '@svc/eventstore';
import { type AccountCommand, accountDecider, accountStream } from '@svc/ledger';
import { stats } from '@svc/ledger/testing/account-fixtures';
import { ManualClock, PgSqlRunner, usdToNano } from '@svc/platform';
import { cliHarness } from '../support/cli';
import { api, type Call, startGateway, stopGateway } from '../support/gateway';
import { until } from '../support/until';

const ADMIN_TOKEN = 'admin-token-for-statement-tests';
const chat = { model: 'sim/echo', messages: [{ role: 'user', content: 'a statement line' }], max_tokens: 20 };
const nano = (usd: number) => usdToNano(usd, { allowNegative: true });

/**
 * Issue 23, corrections and statements, through HTTP with the clock moved by hand: from Friday
 * 30 October 2026 over the month's reset (Sunday 1 November) and the week's (Monday 2 November).
 */
describe('statements and corrections (issue 23)', () => {
  const clock = new ManualClock(new Date('2026-10-30T10:00:00.000Z'));
  let gw: Awaited<ReturnType<typeof startGateway>>;
  let call: Call;
  let accountId: string;
  let key: string;
  let keyId: string;
  let management: string;
  const admin = (method: string, path: string, body?: unknown) => call(method, path, { body, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  const adjust = (body: object) => admin('POST', `/admin/accounts/${accountId}/adjustments`, body);
  const spend = async (at: string) => {
    clock.set(at);
    const r = await call('POST', '/v1/chat/completions', { key, body: chat });
    expect(r.status).toBe(200);
  };
  const statement = (from: string, to: string, k = management) =>
    call('GET', `/v1/credits/statement?from=${encodeURIComponent(from)}&to=${encodeURIComponent(to)}`, { key: k });

  beforeAll(async () => {
    gw = await startGateway({ SVC_ADMIN_TOKEN: ADMIN_TOKEN }, undefined, { clock });
    call = api(gw.url.replace(/\/v1$/, ''));
    accountId = (await admin('POST', '/admin/accounts', { initial_credits_usd: 5 })).json.id;
    const created = await admin('POST', `/admin/accounts/${accountId}/keys`, { limit: 4, limit_reset: 'weekly' });
    [key, keyId] = [created.json.key, created.json.data.id];
    management = (await admin('POST', `/admin/accounts/${accountId}/keys`, { scope: 'management' })).json.key;
    await spend('2026-10-30T11:00:00.000Z'); // Friday: before the period
    await spend('2026-10-31T11:00:00.000Z'); // Saturday: last month, last week
    await spend('2026-11-01T11:00:00.000Z'); // Sunday: this month, last week
    await spend('2026-11-01T12:00:00.000Z');
    await spend('2026-11-02T09:00:00.000Z'); // Monday: this month, this week
  }, 60_000);

  afterAll(() => stopGateway(gw));

  describe('corrections: POST /admin/accounts/{id}/adjustments', () => {
    it('records a credit note with the operator and reason, answers 201 with the balance, and moves /v1/credits', async () => {
      clock.set('2026-11-02T10:00:00.000Z');
      const before = (await call('GET', '/v1/credits', { key })).json.data;
      const r = await adjust({ amount_usd: 0.25, kind: 'credit_note', reason: 'refund: upstream outage', operator: 'ana@ops', adjustment_id: 'adj-outage-1' });
      expect(r.status).toBe(201);
      expect(r.json.data).toEqual({
        adjustment_id: 'adj-outage-1',
        account_id: accountId,
        kind: 'credit_note',
        amount_usd: 0.25,
        reason: 'refund: upstream outage',
        operator: 'ana@ops',
        created_at: '2026-11-02T10:00:00.000Z',
      });
      expect(r.json.balance).toMatchObject({ account_id: accountId, total_adjustments: 0.25 });
      expect(nano(r.json.balance.balance)).toBe(nano(before.balance) + nano(0.25));
      const after = (await call('GET', '/v1/credits', { key })).json.data;
      expect(nano(after.balance) - nano(before.balance)).toBe(nano(0.25));
      expect(nano(after.available) - nano(before.available)).toBe(nano(0.25));
      expect(after.total_credits).toBe(before.total_credits); // nothing edited in place
      expect(after.total_adjustments).toBe(0.25);
      expect((await admin('GET', `/admin/accounts/${accountId}`)).json.data.balance).toBe(after.balance);
    });

    it('makes a retry safe: the same id and content answers the same, records nothing; other content is 409', async () => {
      clock.set('2026-11-02T10:05:00.000Z');
      const again = await adjust({
        amount_usd: 0.25,
        kind: 'credit_note',
        reason: 'refund: upstream outage',
        operator: 'ana@ops',
        adjustment_id: 'adj-outage-1',
      });
      expect(again.status).toBe(201);
      expect(again.json.data.created_at).toBe('2026-11-02T10:00:00.000Z');
      expect(again.json.balance.total_adjustments).toBe(0.25);
      const conflict = await adjust({
        amount_usd: 0.3,
        kind: 'credit_note',
        reason: 'refund: upstream outage',
        operator: 'ana@ops',
        adjustment_id: 'adj-outage-1',
      });
      expect(conflict.status).toBe(409);
      expect(conflict.json.error).toMatchObject({ code: 'adjustment_id_conflict', param: 'adjustment_id' });
    });

    it('refuses a negative adjustment past the available balance with 409, and bad bodies with 400 naming the field, writing nothing', async () => {
      const credits = (await call('GET', '/v1/credits', { key })).json.data;
      const tooMuch = await adjust({ amount_usd: -(credits.available + 0.000000001), kind: 'adjustment', reason: 'write-off', operator: 'bob' });
      expect(tooMuch.status).toBe(409);
      expect(tooMuch.json.error).toMatchObject({ type: 'invalid_request_error', code: 'adjustment_exceeds_balance', param: 'amount_usd' });
      for (const [body, param] of [
        [{ amount_usd: -0.1, kind: 'credit_note', reason: 'r', operator: 'bob' }, 'amount_usd'],
        [{ amount_usd: 0, kind: 'adjustment', reason: 'r', operator: 'bob' }, 'amount_usd'],
        [{ amount_usd: 0.0000000001, kind: 'adjustment', reason: 'r', operator: 'bob' }, 'amount_usd'],
        [{ amount_usd: 1, kind: 'gift', reason: 'r', operator: 'bob' }, 'kind'],
        [{ amount_usd: 1, kind: 'adjustment', reason: '', operator: 'bob' }, 'reason'],
        [{ amount_usd: 1, kind: 'adjustment', reason: 'r' }, 'operator'],
        [{ amount_usd: 1, kind: 'adjustment', reason: 'r', operator: 'x'.repeat(201) }, 'operator'],
      ] as const) {
        const r = await adjust(body);
        expect({ body, status: r.status, param: r.json.error?.param }).toEqual({ body, status: 400, param });
      }
      expect((await admin('POST', '/admin/accounts/acc_nope/adjustments', { amount_usd: 1, kind: 'adjustment', reason: 'r', operator: 'bob' })).status).toBe(
        404,
      );
      expect((await call('GET', '/v1/credits', { key })).json.data).toEqual(credits);
    });

    it('takes a negative adjustment within the balance, and the audit log shows both with kind, amount, reason and operator', async () => {
      clock.set('2026-11-03T09:00:00.000Z');
      const r = await adjust({ amount_usd: -0.1, kind: 'adjustment', reason: 'manual correction', operator: 'bob' });
      expect(r.status).toBe(201);
      expect(r.json.data.adjustment_id).toMatch(/^adj_[0-9a-f]{24}$/);
      const log = await until('the audit log', async () => {
        const entries = (await admin('GET', `/admin/audit-log?account_id=${accountId}`)).json.data.filter(
          (e: { action: string }) => e.action === 'account.adjusted',
        );
        return entries.length === 2 && entries;
      });
      expect(log[0]).toMatchObject({
        actor: 'admin',
        action: 'account.adjusted',
        target_id: accountId,
        details: { kind: 'adjustment', amount_usd: -0.1, reason: 'manual correction', operator: 'bob' },
      });
      expect(log[1]).toMatchObject({
        at: '2026-11-02T10:00:00.000Z',
        details: { adjustment_id: 'adj-outage-1', kind: 'credit_note', amount_usd: 0.25, operator: 'ana@ops' },
      });
      expect(log[0].ip).toBeTruthy();
      // The account reads it too.
      const own = (await call('GET', '/v1/audit-log?action=account.adjusted', { key: management })).json.data;
      expect(own).toHaveLength(2);
    });
  });

  describe('statements: GET /v1/credits/statement', () => {
    const FROM = '2026-10-31';
    const TO = '2026-11-04T00:00:00Z';
    let first: { status: number; json: any; text: string };
    let balanceAtTo: number;
    let keyUsage: { usage_weekly: number; usage_monthly: number };

    beforeAll(async () => {
      await spend('2026-11-03T12:00:00.000Z');
      clock.set('2026-11-04T00:00:00.000Z'); // the period has just ended; nothing decided since
      balanceAtTo = (await call('GET', '/v1/credits', { key })).json.data.balance;
      keyUsage = await until('the key usage projection', async () => {
        const k = (await call('GET', `/v1/keys/${keyId}`, { key: management })).json.data;
        return k.usage > 0 && k;
      });
      const r = await statement(FROM, TO);
      first = { ...r, text: JSON.stringify(r.json) };
    });

    it("closes at /v1/credits' balance at that instant, and its lines sum to the movement", () => {
      expect(first.status).toBe(200);
      const s = first.json.data;
      expect(s).toMatchObject({ account_id: accountId, from: '2026-10-31T00:00:00.000Z', to: '2026-11-04T00:00:00.000Z', currency: 'USD' });
      expect(s.closing_balance).toBe(balanceAtTo);
      const lines =
        s.credits.reduce((sum: bigint, c: { amount: number }) => sum + nano(c.amount), 0n) -
        s.charges.reduce((sum: bigint, c: { amount: number }) => sum + nano(c.amount), 0n) +
        s.adjustments.reduce((sum: bigint, a: { amount: number }) => sum + nano(a.amount), 0n);
      expect(lines).toBe(nano(s.closing_balance) - nano(s.opening_balance));
      // Opening: the $5 credit less Friday's charge, both before the period.
      expect(nano(s.opening_balance)).toBeLessThan(nano(5));
      expect(s.credits).toEqual([]);
      expect(s.charges.map((c: { date: string; requests: number }) => [c.date, c.requests])).toEqual([
        ['2026-10-31', 1],
        ['2026-11-01', 2],
        ['2026-11-02', 1],
        ['2026-11-03', 1],
      ]);
      expect(s.charges[1]).toMatchObject({ model: 'sim/echo', key_id: keyId, meters: { input: expect.any(Number), output: expect.any(Number) } });
      expect(s.adjustments.map((a: { kind: string; amount: number; operator: string }) => [a.kind, a.amount, a.operator])).toEqual([
        ['credit_note', 0.25, 'ana@ops'],
        ['adjustment', -0.1, 'bob'],
      ]);
      expect(s.totals.adjustments).toBe(0.15);
      expect(s.built_at_position).toMatch(/^\d{20}\/\d{20}$/);
    });

    it("agrees with the key's spend windows across the weekly and monthly resets", async () => {
      const keyCharges = async (from: string) => {
        const r = await statement(from, TO);
        expect(r.status).toBe(200);
        return r.json.data.charges
          .filter((c: { key_id: string }) => c.key_id === keyId)
          .reduce((sum: bigint, c: { amount: number }) => sum + nano(c.amount), 0n);
      };
      expect(await keyCharges('2026-11-02')).toBe(nano(keyUsage.usage_weekly)); // the week from Monday
      expect(await keyCharges('2026-11-01')).toBe(nano(keyUsage.usage_monthly)); // the month from Sunday the 1st
      expect(await keyCharges(FROM)).toBeGreaterThan(nano(keyUsage.usage_monthly)); // Saturday's is in neither
    });

    it('is byte-identical when built again after new events of a later period', async () => {
      await spend('2026-11-04T08:00:00.000Z');
      clock.set('2026-11-04T09:00:00.000Z');
      expect((await adjust({ amount_usd: 0.01, kind: 'credit_note', reason: 'later', operator: 'ana@ops' })).status).toBe(201);
      const again = await statement(FROM, TO);
      expect(JSON.stringify(again.json)).toBe(first.text);
      const later = (await statement('2026-11-04', '2026-11-04T09:00:00Z')).json.data;
      expect(later.opening_balance).toBe(first.json.data.closing_balance);
      expect(later.built_at_position > first.json.data.built_at_position).toBe(true);
    });

    it('refuses bad periods with 400 naming the parameter, and keys other than management keys with 403', async () => {
      for (const [from, to, param] of [
        ['2026-11-03', '2026-11-01', 'from'],
        ['2026-11-31', '2026-12-01', 'from'],
        ['2026-11-01', 'next tuesday', 'to'],
        ['2025-01-01', '2026-11-01', 'to'],
        ['2026-11-01', '2026-11-05', 'to'], // the clock reads 2026-11-04T09:00: not ended
      ]) {
        const r = await statement(from, to);
        expect({ from, to, status: r.status, type: r.json.error?.type, param: r.json.error?.param }).toEqual({
          from,
          to,
          status: 400,
          type: 'invalid_request_error',
          param,
        });
      }
      const missing = await call('GET', '/v1/credits/statement?from=2026-11-01', { key: management });
      expect([missing.status, missing.json.error.param]).toEqual([400, 'to']);
      const repeated = await call('GET', '/v1/credits/statement?from=2026-11-01&from=2026-11-02&to=2026-11-03', { key: management });
      expect([repeated.status, repeated.json.error.param]).toEqual([400, 'from']);
      const refused = await statement(FROM, TO, key);
      expect(refused.status).toBe(403);
      expect(refused.json.error.code).toBe('management_key_required');
    });
  });
});

/** `cli ledger statement` against PostgreSQL, in a schema of its own, on a history written by the real decider. */
describe('operator CLI: ledger statement (issue 23)', () => {
  const harness = cliHarness('ledger_statement');
  let sql: PgSqlRunner;
  let store: SqlEventStore;

  beforeAll(async () => {
    sql = await PgSqlRunner.connect({ connectionString: harness.url, max: 2 });
    store = new SqlEventStore(sql);
    await store.init();
    const clock = new ManualClock(new Date('2026-11-02T10:00:00.000Z'));
    const aggregates = new AggregateStore(store, clock);
    const run = (at: string, ...commands: AccountCommand[]) => {
      clock.set(at);
      return commands.reduce<Promise<unknown>>(
        (done, command) => done.then(() => aggregates.handle(accountDecider, accountStream('acme'), command, { actor: 'admin' })),
        Promise.resolve(),
      );
    };
    const hold = (holdId: string, amountNano: bigint): AccountCommand => ({
      type: 'PlaceHold',
      holdId,
      keyId: 'k1',
      amountNano,
      model: 'sim/echo',
      endpoint: '/v1/chat/completions',
      ttlMs: 900_000,
    });
    await run('2026-11-02T10:00:00.000Z', { type: 'OpenAccount', accountId: 'acme' }, { type: 'AddCredits', amountNano: 10_000_000_000n, reason: 'purchase' });
    await run('2026-11-02T11:00:00.000Z', hold('h1', 500_000_000n), { type: 'ChargeUsage', holdId: 'h1', amountNano: 300_000_000n, stats: stats() });
    await run('2026-11-02T12:00:00.000Z', hold('h2', 500_000_000n), { type: 'ReleaseHold', holdId: 'h2', errorCode: 'upstream_503' });
    await run('2026-11-03T09:00:00.000Z', {
      type: 'AdjustBalance',
      adjustmentId: 'adj1',
      amountNano: -150_000_000n,
      kind: 'adjustment',
      reason: 'billing error, reversed',
      operator: 'ana',
    });
    await run('2026-11-05T09:00:00.000Z', { type: 'AddCredits', amountNano: 1_000_000_000n, reason: 'purchase' }); // after the period
  }, 30_000);

  afterAll(async () => {
    await store?.close();
    await sql?.close();
  });

  it('prints the statement as JSON, and as CSV with one row per line and 9-decimal amounts', async () => {
    const json = JSON.parse(await harness.run('ledger', 'statement', '--account', 'acme', '--from', '2026-11-02', '--to', '2026-11-04'));
    expect(json).toMatchObject({ account_id: 'acme', opening_balance: 0, closing_balance: 9.55, totals: { credits: 10, charges: 0.3, adjustments: -0.15 } });
    expect(json.releases).toEqual([{ at: '2026-11-02T12:00:00.000Z', hold_id: 'h2', key_id: 'k1', held_amount: 0.5, reason: 'error' }]);
    const csv = (await harness.run('ledger', 'statement', '--account', 'acme', '--from', '2026-11-02', '--to', '2026-11-04', '--format', 'csv')).split('\n');
    expect(csv[0]).toBe('section,at,date,key_id,model,requests,hold_id,adjustment_id,kind,amount,held_amount,meters,reason,operator');
    expect(csv.slice(1, -1)).toEqual([
      'opening_balance,2026-11-02T00:00:00.000Z,,,,,,,,0.000000000,,,account acme,',
      'credit,2026-11-02T10:00:00.000Z,,,,,,,,10.000000000,,,purchase,',
      'charge,,2026-11-02,k1,sim/echo,1,,,,0.300000000,,input=10;output=5,,',
      'adjustment,2026-11-03T09:00:00.000Z,,,,,,adj1,adjustment,-0.150000000,,,"billing error, reversed",ana',
      'release,2026-11-02T12:00:00.000Z,,k1,,,h2,,,,0.500000000,,error,',
    ]);
    expect(csv[csv.length - 1]).toMatch(/^closing_balance,2026-11-04T00:00:00.000Z,,,,,,,,9.550000000,,,built_at_position \d{20}\/\d{20},$/);
  });

  it('refuses a bad period naming the option, and an unknown account', async () => {
    await expect(harness.run('ledger', 'statement', '--account', 'acme', '--from', '2026-11-04', '--to', '2026-11-02')).rejects.toMatchObject({
      code: 'invalid_period',
      details: { param: 'from' },
    });
    await expect(harness.run('ledger', 'statement', '--account', 'acme', '--from', '2026-11-02', '--to', '2026-11-02T25:00')).rejects.toMatchObject({
      code: 'invalid_date',
      details: { param: 'to' },
    });
    await expect(harness.run('ledger', 'statement', '--account', 'acme', '--from', '2026-11-02', '--to', '2026-11-04', '--format', 'xml')).rejects.toThrow(
      '--format must be json or csv',
    );
    await expect(harness.run('ledger', 'statement', '--account', 'nobody', '--from', '2026-11-02', '--to', '2026-11-04')).rejects.toThrow(
      'account nobody has no events',
    );
  });
});
