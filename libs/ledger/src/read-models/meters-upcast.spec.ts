import { randomUUID } from 'node:crypto';
import { fold, SqlEventStore } from '@svc/eventstore';
import type { NewEvent } from '@svc/eventstore';
import { accountDecider, type AccountCommand, type AccountEvent, accountStream, meteredUsage, upcastAccountEvent } from '@svc/ledger';
import type { SqlRunner } from '@svc/platform';
import { ProjectionRunner } from '@svc/projections';
import { getCredits, LEDGER_PROJECTIONS } from './index';
import { memoryPglite } from '@svc/platform/testing/pglite';

/**
 * ARCHITECTURE section 10: UsageCharged records its usage by meter. A log recorded before
 * meters existed is never rewritten; its charges are read through the upcaster (tokens are the
 * meters input, cached_input and output), and balances come out the same.
 */
const AT = '2026-11-02T10:00:00.000Z';
const event = (type: string, data: Record<string, unknown>): NewEvent => ({ id: randomUUID(), type, data, metadata: { at: AT } });
const stats = { model: 'sim/echo', provider: 'sim', endpoint: '/v1/chat/completions', latency_ms: 10, ttft_ms: null };

/** As the gateway wrote them before meters: a charge carries tokens and an amount, no `usage`. */
const RECORDED_BEFORE: NewEvent[] = [
  event('AccountOpened', { account_id: 'old' }),
  event('CreditsAdded', { account_id: 'old', amount_nano: '5000000000', reason: 'signup' }),
  event('HoldPlaced', {
    account_id: 'old',
    hold_id: 'gen-old-1',
    key_id: 'k-old',
    amount_nano: '90000',
    model: 'sim/echo',
    endpoint: '/v1/chat/completions',
    expires_at: '2026-11-02T10:17:00.000Z',
    key_limit: null,
  }),
  event('UsageCharged', {
    account_id: 'old',
    hold_id: 'gen-old-1',
    key_id: 'k-old',
    amount_nano: '12345',
    charged_at: AT,
    exceeded_hold_nano: '0',
    ...stats,
    prompt_tokens: 40,
    completion_tokens: 7,
    cached_tokens: 8,
    reasoning_tokens: 2,
  }),
  // Older still: no charged_at, no exceeded_hold_nano.
  event('HoldPlaced', {
    account_id: 'old',
    hold_id: 'gen-old-2',
    key_id: 'k-old',
    amount_nano: '90000',
    model: 'sim/echo',
    endpoint: '/v1/chat/completions',
    expires_at: '2026-11-02T10:17:00.000Z',
  }),
  event('UsageCharged', {
    account_id: 'old',
    hold_id: 'gen-old-2',
    key_id: 'k-old',
    amount_nano: '555',
    ...stats,
    prompt_tokens: 3,
    completion_tokens: 1,
    cached_tokens: 0,
    reasoning_tokens: 0,
  }),
];

/** Written since: a charge of an image call, billed by its own meters. */
const RECORDED_AFTER: NewEvent[] = [
  event('HoldPlaced', {
    account_id: 'old',
    hold_id: 'gen-new-1',
    key_id: 'k-old',
    amount_nano: '200000000',
    model: 'sim/image',
    endpoint: '/v1/images/generations',
    expires_at: '2026-11-02T10:17:00.000Z',
    key_limit: null,
  }),
  event('UsageCharged', {
    account_id: 'old',
    hold_id: 'gen-new-1',
    key_id: 'k-old',
    amount_nano: '80000007',
    charged_at: AT,
    exceeded_hold_nano: '0',
    ...stats,
    model: 'sim/image',
    endpoint: '/v1/images/generations',
    prompt_tokens: 0,
    completion_tokens: 0,
    cached_tokens: 0,
    reasoning_tokens: 0,
    usage: { images: 2, provider_cost: 7 },
  }),
];

describe('meters: a log recorded before them', () => {
  let sql: SqlRunner;
  let store: SqlEventStore;
  let runner: ProjectionRunner;

  beforeAll(async () => {
    sql = await memoryPglite();
    // As the composition root configures it: the store reads old charges through the ledger's upcaster.
    store = new SqlEventStore(sql, { upcast: upcastAccountEvent });
    await store.init();
    runner = new ProjectionRunner(sql, store, LEDGER_PROJECTIONS, { idleMs: 50 });
    await runner.init();
    await store.append(accountStream('old'), RECORDED_BEFORE, 'no_stream');
    const { position } = await store.append(accountStream('old'), RECORDED_AFTER, 'any');
    runner.start();
    await runner.waitFor(position, undefined, 10_000);
  }, 60_000);

  afterAll(async () => {
    await runner?.stop();
    await store?.close();
    await sql?.close();
  });

  it('reads an old charge as its token meters, and a new one as written', () => {
    const [oldCharge, newCharge] = [RECORDED_BEFORE[3], RECORDED_AFTER[1]].map((e) => e.data as Extract<AccountEvent, { type: 'UsageCharged' }>['data']);
    expect(meteredUsage(oldCharge)).toEqual({ input: 40, cached_input: 8, output: 7 });
    expect(meteredUsage(newCharge)).toEqual({ images: 2, provider_cost: 7 });
  });

  it('hands every reader of the store the old charge with its token meters, and the new one as written', async () => {
    const charges = (await store.readStream(accountStream('old'))).filter((e) => e.type === 'UsageCharged');
    expect(charges.map((e) => (e.data as { usage?: unknown }).usage)).toEqual([
      { input: 40, cached_input: 8, output: 7 },
      { input: 3, output: 1 },
      { images: 2, provider_cost: 7 },
    ]);
    // The log keeps what was recorded: a store without the upcaster reads the old charge bare.
    const [bare] = (await new SqlEventStore(sql).readStream(accountStream('old'))).filter((e) => e.type === 'UsageCharged');
    expect(bare.data).not.toHaveProperty('usage');
  });

  it('keeps the balances: the decider and the credits read model agree to the nano', async () => {
    const events = (await store.readStream(accountStream('old'))) as unknown as AccountEvent[];
    const state = fold(accountDecider, events);
    expect(state.chargedNano).toBe(12_345n + 555n + 80_000_007n);
    expect(await getCredits(sql, 'old')).toMatchObject({ purchasedNano: 5_000_000_000n, usedNano: state.chargedNano, heldNano: 0n });
  });

  it('shows every generation by meter, and the non-token meters in the activity', async () => {
    const { rows } = await sql.query<{ id: string; meters: unknown }>('SELECT id, meters FROM generations ORDER BY id');
    expect(rows).toEqual([
      { id: 'gen-new-1', meters: { images: 2, provider_cost: 7 } },
      { id: 'gen-old-1', meters: { input: 40, cached_input: 8, output: 7 } },
      { id: 'gen-old-2', meters: { input: 3, output: 1 } },
    ]);
    const activity = await sql.query<Record<string, string>>(
      `SELECT model, images::text, provider_cost::text, prompt_tokens::text FROM activity_daily ORDER BY model`,
    );
    expect(activity.rows).toEqual([
      { model: 'sim/echo', images: '0', provider_cost: '0', prompt_tokens: '43' },
      { model: 'sim/image', images: '2', provider_cost: '7', prompt_tokens: '0' },
    ]);
  });

  it('rebuilds every projection from 0 to exactly the live rows', async () => {
    const snapshot = async () => {
      const out: Record<string, string[]> = {};
      for (const p of LEDGER_PROJECTIONS) for (const t of p.tables) out[t] = (await sql.query(`SELECT * FROM ${t}`)).rows.map((r) => JSON.stringify(r)).sort();
      return out;
    };
    const live = await snapshot();
    await runner.rebuild();
    expect(await snapshot()).toEqual(live);
  });
});

/**
 * Issue 41 D: the account remembers what the hold reaper charged, by meter, to correct it by the
 * process's own charge. The decider records a reaped charge with its meters; one recorded bare
 * (before meters) is evolved from the store's upcast, with its tokens' meters.
 */
describe('meters: a reaped charge recorded before them', () => {
  let sql: SqlRunner;
  let store: SqlEventStore;

  beforeAll(async () => {
    sql = await memoryPglite();
    store = new SqlEventStore(sql, { upcast: upcastAccountEvent });
    await store.init();
  }, 60_000);

  afterAll(async () => {
    await store?.close();
    await sql?.close();
  });

  it('corrects it by what the process delivered beyond its token meters', async () => {
    const stream = accountStream('reaped');
    await store.append(
      stream,
      [
        event('AccountOpened', { account_id: 'reaped' }),
        event('CreditsAdded', { account_id: 'reaped', amount_nano: '5000000000', reason: 'signup' }),
        event('HoldPlaced', {
          account_id: 'reaped',
          hold_id: 'gen-reaped',
          key_id: 'k-old',
          amount_nano: '90000',
          model: 'sim/echo',
          endpoint: '/v1/chat/completions',
          expires_at: '2026-11-02T10:17:00.000Z',
        }),
        // The reaper's charge from what the process had recorded: tokens, no `usage`.
        event('UsageCharged', {
          account_id: 'reaped',
          hold_id: 'gen-reaped',
          key_id: 'k-old',
          amount_nano: '12345',
          charged_at: AT,
          exceeded_hold_nano: '0',
          ...stats,
          prompt_tokens: 40,
          completion_tokens: 7,
          cached_tokens: 8,
          reasoning_tokens: 0,
          reaped: true,
        }),
      ],
      'no_stream',
    );
    const state = fold(accountDecider, (await store.readStream(stream)) as unknown as AccountEvent[]);
    const own: AccountCommand = {
      type: 'ChargeUsage',
      holdId: 'gen-reaped',
      amountNano: 20_000n,
      stats: { ...stats, prompt_tokens: 40, completion_tokens: 12, cached_tokens: 8, reasoning_tokens: 0 },
      usage: { input: 40, cached_input: 8, output: 12 },
    };
    const [corrected] = accountDecider.decide(own, state, new Date('2026-11-02T10:01:00.000Z'));
    expect(corrected).toMatchObject({ type: 'UsageCorrected', data: { amount_nano: String(20_000 - 12_345), usage_added: { output: 5 } } });
  });
});
