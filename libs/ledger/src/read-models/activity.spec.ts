import { randomBytes } from 'node:crypto';
import { AggregateStore, SqlEventStore } from '@svc/eventstore';
import { DEFAULT_KEY_SETTINGS, keyDecider, keyStream, identityProjection } from '@svc/identity';
import { type AccountCommand, accountDecider, accountStream, type GenerationStats } from '@svc/ledger';
import { ManualClock, type SqlRunner } from '@svc/platform';
import { freshPgRunner } from '@svc/platform/testing/pg';
import { ProjectionRunner } from '@svc/projections';
import { activityProjection, getActivity } from './activity';

const stats: GenerationStats = {
  model: 'sim/echo',
  provider: 'sim',
  endpoint: '/v1/chat/completions',
  prompt_tokens: 10,
  completion_tokens: 5,
  cached_tokens: 0,
  reasoning_tokens: 0,
  latency_ms: 20,
  ttft_ms: null,
};

/**
 * An end-user id (`user`, `safety_identifier`, `metadata.user_id`: spec 4.2, 4.3) of `chars`
 * random base64 characters: incompressible, so PostgreSQL cannot squeeze it under the ~2.7 KB a
 * btree index row may hold.
 */
const randomUser = (chars: number) =>
  randomBytes(Math.ceil((chars * 3) / 4))
    .toString('base64')
    .slice(0, chars);

/** The activity schema before its end user was indexed by hash, as older databases still hold it. */
const ACTIVITY_BEFORE_ISSUE_41 = [
  `CREATE TABLE activity_open_holds (hold_id text NOT NULL, account_id text NOT NULL, model text NOT NULL, endpoint text NOT NULL, user_id text, PRIMARY KEY (account_id, hold_id))`,
  `CREATE TABLE activity_daily (
    account_id text NOT NULL, key_id text NOT NULL, day date NOT NULL, model text NOT NULL, endpoint text NOT NULL, user_id text,
    requests integer NOT NULL, requests_not_billed integer NOT NULL, prompt_tokens bigint NOT NULL, completion_tokens bigint NOT NULL,
    cached_tokens bigint NOT NULL, reasoning_tokens bigint NOT NULL, cost_nano bigint NOT NULL)`,
  `CREATE UNIQUE INDEX activity_daily_row ON activity_daily (account_id, key_id, day, model, endpoint, user_id) NULLS NOT DISTINCT`,
];

/**
 * Applies the log until every projection of `runner` has applied `position`. An append becomes
 * readable once no older transaction runs on the server, so a first catch-up may not see it yet.
 */
async function catchUpTo(runner: ProjectionRunner, position: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    await runner.catchUpAll();
    if ((await runner.status()).every((s) => s.position >= position)) return;
    if (Date.now() > deadline) throw new Error(`projections did not reach ${position}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe('the activity read model on postgres, whatever end-user id a request names (issue 41 C)', () => {
  const clock = new ManualClock(new Date('2026-11-02T10:00:00.000Z'));
  const day = '2026-11-02';
  let sql: SqlRunner;
  let store: SqlEventStore;
  let aggregates: AggregateStore;
  let holds = 0;

  beforeEach(async () => {
    sql = await freshPgRunner('activity');
    store = new SqlEventStore(sql);
    await store.init();
    aggregates = new AggregateStore(store, clock);
  });

  afterEach(async () => {
    await store?.close();
    await sql?.close();
  });

  const account = (id: string, command: AccountCommand, metadata = {}) => aggregates.handle(accountDecider, accountStream(id), command, metadata);

  /** An account with a key of its own workspace: getActivity counts only the workspace's keys. */
  const openAccount = async (id: string) => {
    await account(id, { type: 'OpenAccount', accountId: id });
    await account(id, { type: 'AddCredits', amountNano: 5_000_000_000n, reason: 'signup' });
    await aggregates.handle(keyDecider, keyStream(`${id}-k`), {
      type: 'CreateKey',
      keyId: `${id}-k`,
      accountId: id,
      workspaceId: id,
      orgId: null,
      createdBy: id,
      settings: { ...DEFAULT_KEY_SETTINGS, name: 'k' },
      secretHash: `hash-${id}`,
      secretHint: 'svc_test_...abcd',
    });
  };

  /** A request of `user` charged `costNano`: the end user travels in the hold's metadata, as the metering pipeline records it. */
  const charged = async (id: string, user: string | null, costNano: bigint) => {
    const holdId = `h${++holds}`;
    const metadata = user === null ? {} : { user };
    await account(
      id,
      { type: 'PlaceHold', holdId, keyId: `${id}-k`, amountNano: 1_000_000n, model: 'sim/echo', endpoint: '/v1/chat/completions', ttlMs: 60_000 },
      metadata,
    );
    const r = await account(id, { type: 'ChargeUsage', holdId, amountNano: costNano, stats });
    return r.appended!.position;
  };

  const activityOf = (id: string, user: string | null) =>
    getActivity(sql, { accountId: id, workspaceId: id, keyId: null, from: day, to: day, user }).then((rows) => rows.map((r) => [r.requests, r.costNano]));

  it('records a request whose end user is 3 KB of random text, beside the others, and the filter by user finds exactly its own', async () => {
    const runner = new ProjectionRunner(sql, store, [identityProjection, activityProjection], { idleMs: 20 });
    await runner.init();
    await openAccount('a1');
    const long = randomUser(3000);
    // Same length and all but the last character: a bounded or prefix key would merge the two.
    const twin = `${long.slice(0, -1)}${long.endsWith('A') ? 'B' : 'A'}`;
    await charged('a1', long, 700n);
    await charged('a1', 'short-user', 11n);
    await charged('a1', twin, 90n);
    await charged('a1', long, 3n);
    const last = await charged('a1', null, 5n);
    const logged = jest.spyOn(console, 'error').mockImplementation(() => undefined);
    try {
      // One event per batch first (the holds of earlier batches path), then the whole log in
      // one batch (a rebuild): the same rows either way, and nothing set aside.
      const oneByOne = new ProjectionRunner(sql, store, [identityProjection, activityProjection], { batchSize: 1 });
      await catchUpTo(oneByOne, last);
      const expected = {
        all: [[5, 809n]],
        long: [[2, 703n]],
        twin: [[1, 90n]],
        short: [[1, 11n]],
      };
      const seen = async () => ({
        all: await activityOf('a1', null),
        long: await activityOf('a1', long),
        twin: await activityOf('a1', twin),
        short: await activityOf('a1', 'short-user'),
      });
      expect(await seen()).toEqual(expected);
      expect(await oneByOne.quarantined()).toEqual([]);
      expect(await runner.rebuild('activity')).toBeGreaterThan(0);
      expect(await seen()).toEqual(expected);
      expect(await runner.quarantined()).toEqual([]);
      expect((await runner.status()).map((s) => [s.name, s.lag, s.quarantined])).toEqual([
        ['identity', 0, 0],
        ['activity', 0, 0],
      ]);
      expect(logged).not.toHaveBeenCalled();
    } finally {
      logged.mockRestore();
    }
  });

  it('keeps counting the rows of a database created before: its end users are indexed by hash in place, and their later requests add to the same rows', async () => {
    await openAccount('a2');
    await charged('a2', 'old-user', 40n);
    const applied = await charged('a2', null, 2n);
    // The older read model had applied those two requests, under its own schema, up to `applied`.
    for (const statement of ACTIVITY_BEFORE_ISSUE_41) await sql.query(statement);
    await sql.query('CREATE TABLE projection_checkpoints (name text PRIMARY KEY, position text NOT NULL, updated_at timestamptz NOT NULL DEFAULT now())');
    await sql.query("INSERT INTO projection_checkpoints (name, position) VALUES ('activity', $1)", [applied]);
    await sql.query(
      `INSERT INTO activity_daily VALUES ('a2', 'a2-k', $1, 'sim/echo', '/v1/chat/completions', 'old-user', 1, 0, 10, 5, 0, 0, 40),
                                         ('a2', 'a2-k', $1, 'sim/echo', '/v1/chat/completions', NULL, 1, 0, 10, 5, 0, 0, 2)`,
      [day],
    );

    const now = new ProjectionRunner(sql, store, [identityProjection, activityProjection]);
    await now.init();
    await charged('a2', 'old-user', 400n);
    await charged('a2', null, 20n);
    await catchUpTo(now, await charged('a2', randomUser(3000), 1n));
    expect(await activityOf('a2', 'old-user')).toEqual([[2, 440n]]);
    expect(await activityOf('a2', null)).toEqual([[5, 463n]]);
    // One row per (day, key, model, endpoint, end user): the old rows were added to, not doubled.
    expect((await sql.query('SELECT user_id FROM activity_daily ORDER BY cost_nano')).rows.map((r: any) => r.user_id?.length ?? null)).toEqual([
      3000,
      null,
      'old-user'.length,
    ]);
    expect(await now.quarantined()).toEqual([]);
  });
});
