import { randomUUID } from 'node:crypto';
import { SqlEventStore } from '@svc/eventstore';
import type { NewEvent } from '@svc/eventstore';
import { accountStream } from '@svc/ledger';
import type { SqlRunner } from '@svc/platform';
import { ProjectionRunner } from '@svc/projections';
import { LEDGER_PROJECTIONS } from './index';
import { memoryPglite } from '@svc/platform/testing/pglite';

/**
 * Issue 23: the generations read model keeps each charge's lines and the provider's cost, whether
 * the charge comes in the same batch as its hold (inserted) or in a later one (updated), and
 * leaves both null for a charge recorded without them (an older event: the log is not rewritten).
 */
const AT = '2026-11-02T10:00:00.000Z';
const event = (type: string, data: Record<string, unknown>): NewEvent => ({ id: randomUUID(), type, data, metadata: { at: AT } });
const stats = {
  model: 'sim/echo',
  provider: 'sim',
  endpoint: '/v1/chat/completions',
  latency_ms: 10,
  ttft_ms: null,
  prompt_tokens: 1000,
  completion_tokens: 100,
  cached_tokens: 0,
  reasoning_tokens: 0,
};
const hold = (id: string) =>
  event('HoldPlaced', {
    account_id: 'a',
    hold_id: id,
    key_id: 'k',
    amount_nano: '90000000',
    model: 'sim/echo',
    endpoint: '/v1/chat/completions',
    expires_at: '2026-11-02T10:17:00.000Z',
    key_limit: null,
  });
const LINES = [
  { meter: 'input', quantity: 1000, unit_price_usd: '0.000002', amount_nano: '2000000' },
  { meter: 'output', quantity: 100, unit_price_usd: '0.000008', amount_nano: '800000' },
];
const charge = (id: string, extra: Record<string, unknown>) =>
  event('UsageCharged', {
    account_id: 'a',
    hold_id: id,
    key_id: 'k',
    amount_nano: '2800000',
    charged_at: AT,
    exceeded_hold_nano: '0',
    ...stats,
    usage: { input: 1000, output: 100 },
    ...extra,
  });

describe('generations: cost lines and provider cost (issue 23)', () => {
  let sql: SqlRunner;
  let store: SqlEventStore;
  let runner: ProjectionRunner;

  beforeAll(async () => {
    sql = await memoryPglite();
    store = new SqlEventStore(sql);
    await store.init();
    runner = new ProjectionRunner(sql, store, LEDGER_PROJECTIONS, { idleMs: 50 });
    await runner.init();
    runner.start();
    const opened = await store.append(
      accountStream('a'),
      [event('AccountOpened', { account_id: 'a' }), event('CreditsAdded', { account_id: 'a', amount_nano: '5000000000', reason: 'signup' })],
      'no_stream',
    );
    await runner.waitFor(opened.position, undefined, 10_000);
    // Hold and charge in one batch: the row is inserted with its outcome.
    await store.append(accountStream('a'), [hold('gen-same'), charge('gen-same', { lines: LINES, provider_cost_nano: '1960000' })], 'any');
    await store.append(accountStream('a'), [hold('gen-old'), charge('gen-old', {})], 'any');
    // The hold projected first, the charge later: the row is updated.
    const held = await store.append(accountStream('a'), [hold('gen-later'), hold('gen-unknown')], 'any');
    await runner.waitFor(held.position, undefined, 10_000);
    const { position } = await store.append(
      accountStream('a'),
      [charge('gen-later', { lines: LINES, provider_cost_nano: '0' }), charge('gen-unknown', { lines: LINES })],
      'any',
    );
    await runner.waitFor(position, undefined, 10_000);
  }, 60_000);

  afterAll(async () => {
    await runner?.stop();
    await store?.close();
    await sql?.close();
  });

  it('keeps the lines and the provider cost as recorded, null where the event has none', async () => {
    const { rows } = await sql.query<{ id: string; cost_lines: unknown; provider_cost_nano: string | null; cost_nano: string }>(
      'SELECT id, cost_lines, provider_cost_nano::text, cost_nano::text FROM generations ORDER BY id',
    );
    expect(rows).toEqual([
      { id: 'gen-later', cost_lines: LINES, provider_cost_nano: '0', cost_nano: '2800000' },
      { id: 'gen-old', cost_lines: null, provider_cost_nano: null, cost_nano: '2800000' },
      { id: 'gen-same', cost_lines: LINES, provider_cost_nano: '1960000', cost_nano: '2800000' },
      { id: 'gen-unknown', cost_lines: LINES, provider_cost_nano: null, cost_nano: '2800000' },
    ]);
  });
});
