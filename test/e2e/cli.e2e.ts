import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { AggregateStore, SqlEventStore } from '@svc/eventstore';
import { accountDecider, accountStream } from '@svc/ledger';
import { ManualClock, PgSqlRunner } from '@svc/platform';
import { cliHarness } from '../support/cli';
import { ROOT } from '../support/server-process';

/** `cli projections status|rebuild` against PostgreSQL, in a schema of its own. */
describe('operator CLI: projections', () => {
  const harness = cliHarness('cli');
  const cli = harness.run;

  beforeAll(async () => {
    // Ten events: three accounts opened and credited, two holds placed, two released.
    const sql = await PgSqlRunner.connect({ connectionString: harness.url, max: 2 });
    const store = new SqlEventStore(sql);
    await store.init();
    const aggregates = new AggregateStore(store, new ManualClock());
    for (const id of ['c1', 'c2', 'c3']) {
      await aggregates.handle(accountDecider, accountStream(id), { type: 'OpenAccount', accountId: id });
      await aggregates.handle(accountDecider, accountStream(id), { type: 'AddCredits', amountNano: 10n, reason: 'signup' });
    }
    for (const h of ['h1', 'h2']) {
      await aggregates.handle(accountDecider, accountStream('c1'), {
        type: 'PlaceHold',
        holdId: h,
        keyId: 'k',
        amountNano: 1n,
        model: 'm',
        endpoint: '/v1/x',
        ttlMs: 1,
      });
      await aggregates.handle(accountDecider, accountStream('c1'), { type: 'ReleaseHold', holdId: h, errorCode: 'x' });
    }
    await store.close();
    await sql.close();
  }, 30_000);

  it('reports every projection behind by the whole log before any runner ran', async () => {
    const out = await cli('projections', 'status');
    expect(out).toMatch(/^credits\s+10\s+0\s+\(start\)$/m);
    expect(out).toMatch(/^generations\s+10\s+0\s+\(start\)$/m);
    expect(out).toMatch(/^identity\s+10\s+0\s+\(start\)$/m);
    expect(out).toMatch(/^audit_log\s+10\s+0\s+\(start\)$/m);
  });

  it('rebuilds one projection from position 0, then reports it caught up', async () => {
    const out = await cli('projections', 'rebuild', 'credits');
    expect(out).toContain('credits: rebuilt from 10 events');
    const status = await cli('projections', 'status');
    expect(status).toMatch(/^credits\s+0\s+0\s+\d{20}\/\d{20}$/m);
    expect(status).toMatch(/^generations\s+10\s+0\s+\(start\)$/m);
  });

  it('rebuilds all projections when no name is given', async () => {
    const out = await cli('projections', 'rebuild');
    for (const name of ['identity', 'credits', 'generations', 'key_usage', 'audit_log']) expect(out).toContain(`${name}: rebuilt from 10 events`);
    expect(await cli('projections', 'status')).not.toMatch(/\(start\)/);
  });

  it('refuses an unknown projection by name', async () => {
    await expect(cli('projections', 'rebuild', 'nope')).rejects.toThrow(/unknown projection nope/);
  });

  it("runs the operator API's operations: accounts, credits, keys, organizations, audit log", async () => {
    const owner = JSON.parse(await cli('accounts', 'create', '--credits', '2')).id;
    const member = JSON.parse(await cli('accounts', 'create')).id;
    expect(JSON.parse(await cli('accounts', 'credit', member, '0.5'))).toMatchObject({ account_id: member, total_credits: 0.5, balance: 0.5 });
    const org = JSON.parse(await cli('orgs', 'create', owner, '--name', 'Acme')).id;
    expect(JSON.parse(await cli('orgs', 'add-member', org, member, 'member'))).toMatchObject({ role: 'member' });
    const key = JSON.parse(await cli('keys', 'create', member, '--org', org, '--body', '{"name": "ci", "scope": "read_only", "limit": 1}'));
    expect(key.key).toMatch(/^svc_live_/);
    expect(key.data).toMatchObject({ name: 'ci', scope: 'read_only', limit: 1, organization_id: org, created_by: member });
    await expect(cli('keys', 'create', member, '--body', '{"scope": "root"}')).rejects.toMatchObject({ param: 'scope' });

    const log = JSON.parse(await cli('audit-log', '--account', owner));
    // The account's credit grant is recorded too (issue 15.7), by the CLI.
    expect(log.map((e: { action: string }) => e.action)).toEqual(['key.created', 'org.member_added', 'org.created', 'credits.added']);
    expect(log[3]).toMatchObject({ actor: 'cli', account_id: owner, target_id: owner });
    expect(log[0]).toMatchObject({ actor: 'cli', account_id: owner, actor_account_id: null, target_id: key.data.id });
  }, 30_000);
});

/** The built CLI as an operator runs it, against the schema of `harness`. */
function runBuiltCli(url: string, args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  const childEnv: NodeJS.ProcessEnv = { ...process.env, DATABASE_URL: url, ...env };
  delete childEnv.EVENTSTORE_URL;
  delete childEnv.LOG_LEVEL;
  Object.assign(childEnv, env);
  return new Promise((resolve) => {
    execFile(process.execPath, [join(ROOT, 'dist', 'src', 'cli.js'), ...args], { cwd: ROOT, env: childEnv }, (err, stdout, stderr) =>
      resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

describe('operator CLI: failures and credit reasons', () => {
  const harness = cliHarness('cli_fail');
  const cli = harness.run;

  beforeAll(() => {
    if (!existsSync(join(ROOT, 'dist', 'src', 'cli.js'))) throw new Error('dist/src/cli.js is missing: `npm test` builds it first (npm run build)');
  });

  it('says what failed in one line on standard error, exits 1, and prints no stack trace', async () => {
    const result = await runBuiltCli(harness.url, ['accounts', 'credit', 'acc_missing', '1']);
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('');
    const lines = result.stderr.trimEnd().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/account/i);
    expect(result.stderr).not.toMatch(/^\s+at /m);
  }, 60_000);

  it('prints the stack trace with --debug, or at LOG_LEVEL=debug', async () => {
    const [flagged, debug] = await Promise.all([
      runBuiltCli(harness.url, ['accounts', 'credit', 'acc_missing', '1', '--debug']),
      runBuiltCli(harness.url, ['accounts', 'credit', 'acc_missing', '1'], { LOG_LEVEL: 'debug' }),
    ]);
    expect(flagged.code).toBe(1);
    expect(flagged.stderr).toMatch(/^\s+at /m);
    expect(debug.code).toBe(1);
    expect(debug.stderr).toMatch(/^\s+at /m);
  }, 60_000);

  it('says a database it cannot reach in one line', async () => {
    const result = await runBuiltCli('postgres://svc@127.0.0.1:1/none', ['projections', 'status']);
    expect(result.code).toBe(1);
    expect(result.stderr.trimEnd().split('\n')).toHaveLength(1);
    expect(result.stderr).toMatch(/^error: .*ECONNREFUSED/);
  }, 60_000);

  /** The reasons of the account's credits, as its statement (replayed from the log) gives them. */
  async function creditReasons(account: string): Promise<string[]> {
    const to = new Date().toISOString();
    const statement = JSON.parse(await cli('ledger', 'statement', '--account', account, '--from', new Date(Date.now() - 86_400_000).toISOString(), '--to', to));
    return statement.credits.map((c: { reason: string }) => c.reason);
  }

  it('records the reason the operator gives for a credit, and "cli" when none is given', async () => {
    const account = JSON.parse(await cli('accounts', 'create', '--credits', '1')).id;
    await cli('accounts', 'credit', account, '0.5', '--reason', 'goodwill after the outage of 2026-11-20');
    await cli('accounts', 'credit', account, '0.25');
    // The statement covers [from, to) with `to` not in the future: let the last credit be past.
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await creditReasons(account)).toEqual(['cli', 'goodwill after the outage of 2026-11-20', 'cli']);
    const blank = await runBuiltCli(harness.url, ['accounts', 'credit', account, '1', '--reason', '   ']);
    expect(blank.code).toBe(1);
    expect(blank.stderr).toMatch(/give a reason of 1-200 characters/);
  }, 30_000);
});
