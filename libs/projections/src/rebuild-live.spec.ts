import { AggregateStore, SqlEventStore } from '@svc/eventstore';
import { waitFor } from '@svc/eventstore/testing/contract';
import { accountDecider, accountStream, creditsProjection } from '@svc/ledger';
import { ManualClock, type SqlRunner } from '@svc/platform';
import { freshPgRunner } from '@svc/platform/testing/pg';
import { ProjectionRunner } from './runner';

/**
 * Issue 41 item 20: rebuilding projections while the gateway served traffic emptied the key
 * tables, and valid keys got 401 until the rebuild finished. A rebuild now builds beside the
 * live model and switches once complete: readers see the whole live model until then.
 */
describe('issue 41 item 20: a rebuild while the service runs', () => {
  let sql: SqlRunner;
  let store: SqlEventStore;
  let aggregates: AggregateStore;
  let live: ProjectionRunner;
  const ACCOUNTS = 40;

  beforeAll(async () => {
    sql = await freshPgRunner('rebuildlive');
    store = new SqlEventStore(sql);
    await store.init();
    aggregates = new AggregateStore(store, new ManualClock());
    live = new ProjectionRunner(sql, store, [creditsProjection]);
    await live.init();
    for (let i = 0; i < ACCOUNTS; i++) {
      await aggregates.handle(accountDecider, accountStream(`a${i}`), { type: 'OpenAccount', accountId: `a${i}` });
      await aggregates.handle(accountDecider, accountStream(`a${i}`), { type: 'AddCredits', amountNano: 1000n + BigInt(i), reason: 'signup' });
    }
    // A transaction still open elsewhere on the server (another suite's) holds the newest events
    // back from readers until it ends (delayed, never lost): catch up until every account is in.
    await waitFor(async () => {
      await live.catchUpAll();
      return (await rows()).size === ACCOUNTS;
    }, 15_000);
  });

  afterAll(async () => {
    await store.close();
    await sql.close();
  });

  const rows = async () =>
    new Map(
      (await sql.query<{ account_id: string; purchased_nano: string }>('SELECT account_id, purchased_nano FROM credit_accounts')).rows.map((r) => [
        r.account_id,
        BigInt(r.purchased_nano),
      ]),
    );

  it('leaves readers the whole live model while it replays, lets the live runner keep it current, and switches to a model holding all of it', async () => {
    const before = await rows();
    expect(before.size).toBe(ACCOUNTS);
    // A separate runner replays, one event per batch, as the CLI does beside a running worker.
    const rebuilder = new ProjectionRunner(sql, store, [creditsProjection], { batchSize: 1 });
    const seen: Map<string, bigint>[] = [];
    let batches = 0;
    let appended = false;
    const probes: Promise<void>[] = [];
    await rebuilder.rebuild('credits', () => {
      batches++;
      probes.push(
        (async () => {
          seen.push(await rows());
          // Traffic goes on: a charge-free top-up, which the live runner projects at once.
          if (!appended && batches > ACCOUNTS) {
            appended = true;
            await aggregates.handle(accountDecider, accountStream('a0'), { type: 'AddCredits', amountNano: 5n, reason: 'top-up' });
            await live.catchUpAll();
          }
        })(),
      );
    });
    await Promise.all(probes);
    expect(batches).toBeGreaterThan(ACCOUNTS);
    // Every look during the rebuild found every account, none with less than it had.
    for (const view of seen) {
      expect(view.size).toBe(ACCOUNTS);
      for (const [id, purchased] of before) expect(view.get(id)! >= purchased).toBe(true);
    }
    // The rebuilt model holds everything, the top-up made during the rebuild included.
    await live.catchUpAll();
    const after = await rows();
    expect(after.size).toBe(ACCOUNTS);
    expect(after.get('a0')).toBe(before.get('a0')! + 5n);
    for (let i = 1; i < ACCOUNTS; i++) expect(after.get(`a${i}`)).toBe(before.get(`a${i}`));
    // Nothing of the rebuild's own schema is left behind.
    const { rows: schemas } = await sql.query<{ nspname: string }>(`SELECT nspname FROM pg_namespace WHERE nspname LIKE 'rebuild\\_%'`);
    expect(schemas).toEqual([]);
  }, 60_000);
});
