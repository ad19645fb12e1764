import { AggregateStore, SqlEventStore } from '@svc/eventstore';
import { accountDecider, accountStream } from '@svc/ledger';
import { ManualClock, PgSqlRunner } from '@svc/platform';
import { cliHarness } from '../support/cli';

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
      await aggregates.handle(accountDecider, accountStream('c1'), { type: 'PlaceHold', holdId: h, keyId: 'k', amountNano: 1n, model: 'm', endpoint: '/v1/x', ttlMs: 1 });
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

  it('runs the operator API\'s operations: accounts, credits, keys, organizations, audit log', async () => {
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
