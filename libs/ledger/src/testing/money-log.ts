import { START, type EventStore, type NewEvent, type Position } from '@svc/eventstore';
import { randomUUID } from 'node:crypto';
import { Random } from './random';

/**
 * A deterministic log for the export and reconciliation tests: accounts credited, charges (each
 * after its hold) on several providers and models, BYOK and batch charges, charges with and
 * without a provider cost, credit notes and adjustments of both signs, releases, and events of
 * other streams; `metadata.at` mostly rising but sometimes earlier than the event before it (two
 * gateways' clocks), and some charges with a `charged_at` later than their `at`.
 *
 * `appended` keeps what was appended, so that a test can work out what an export must hold from
 * the appended data by its own arithmetic, not through the code under test.
 */
export interface AppendedEvent {
  stream: string;
  type: string;
  data: Record<string, unknown>;
  metadata: { at: string };
}

export const MONEY_LOG_START = Date.parse('2026-11-01T00:00:00.000Z');
const MINUTE = 60_000;

export const PROVIDERS = [
  { provider: 'sim', model: 'sim/echo' },
  { provider: 'sim', model: 'sim/small-8k' },
  { provider: 'openai', model: 'openai/gpt-4o-mini' },
  { provider: 'anthropic:byok', model: 'anthropic/claude-haiku' },
] as const;

export function moneyLog(steps: number, seed = 23, accounts = 5): AppendedEvent[][] {
  const random = new Random(seed);
  const out: AppendedEvent[][] = [];
  let clock = MONEY_LOG_START;
  const ids = Array.from({ length: accounts }, (_, i) => `acct-${i}`);
  const ev = (account: string, type: string, data: Record<string, unknown>, at: number): AppendedEvent => ({
    stream: `account-${account}`,
    type,
    data: { account_id: account, ...data },
    metadata: { at: new Date(at).toISOString() },
  });
  for (const account of ids)
    out.push([ev(account, 'AccountOpened', {}, clock), ev(account, 'CreditsAdded', { amount_nano: '100000000000', reason: 'signup' }, clock)]);
  for (let i = 0; i < steps; i++) {
    clock += random.int(1, 3) * MINUTE;
    // Another process's clock, a little behind: `at` is not monotonic in log order.
    const at = random.chance(0.1) ? clock - 2 * MINUTE : clock;
    const account = random.pick(ids);
    const roll = random.next();
    if (roll < 0.7) {
      const { provider, model } = random.pick(PROVIDERS);
      const hold = `gen-${i.toString(16).padStart(8, '0')}`;
      const key = `key-${account}-${random.int(0, 1)}`;
      const amount = random.nano(1n, 50_000_000n);
      const byok = provider.endsWith(':byok');
      const batch = !byok && random.chance(0.15);
      const known = byok || random.chance(0.7);
      const usage = { input: random.int(1, 2000), output: random.int(1, 800) };
      const charge: Record<string, unknown> = {
        hold_id: hold,
        key_id: key,
        amount_nano: amount.toString(),
        model,
        provider,
        endpoint: '/v1/chat/completions',
        prompt_tokens: usage.input,
        completion_tokens: usage.output,
        cached_tokens: 0,
        reasoning_tokens: 0,
        latency_ms: 100,
        ttft_ms: null,
        usage,
        lines: [
          { meter: 'input', quantity: usage.input, unit_price_usd: '0.000001', amount_nano: '0' },
          ...(batch ? [{ meter: 'batch_discount', quantity: 50, unit_price_usd: '-0.1', amount_nano: '0' }] : []),
        ],
        ...(known ? { provider_cost_nano: (byok ? 0n : (amount * BigInt(random.int(50, 95))) / 100n).toString() } : {}),
      };
      // A charge decided a while after its hold: counted at charged_at, which may cross a period bound.
      if (random.chance(0.3)) charge.charged_at = new Date(at + random.int(1, 90) * MINUTE).toISOString();
      const released = random.chance(0.1);
      out.push([
        ev(
          account,
          'HoldPlaced',
          {
            hold_id: hold,
            key_id: key,
            amount_nano: (amount * 2n).toString(),
            model,
            endpoint: '/v1/chat/completions',
            expires_at: new Date(at + 15 * MINUTE).toISOString(),
          },
          at,
        ),
        released ? ev(account, 'HoldReleased', { hold_id: hold, key_id: key, reason: 'error' }, at) : ev(account, 'UsageCharged', charge, at),
      ]);
    } else if (roll < 0.8) {
      out.push([ev(account, 'CreditsAdded', { amount_nano: random.nano(1n, 20_000_000_000n).toString(), reason: 'purchase, "card"' }, at)]);
    } else if (roll < 0.9) {
      const credit = random.chance(0.5);
      const amount = random.nano(1n, 5_000_000_000n);
      out.push([
        ev(
          account,
          'BalanceAdjusted',
          {
            adjustment_id: `adj-${i}`,
            amount_nano: (credit ? amount : -amount).toString(),
            kind: credit ? 'credit_note' : 'adjustment',
            reason: 'refund\nticket 42',
            operator: 'ops@example.com',
          },
          at,
        ),
      ]);
    } else {
      out.push([
        {
          stream: `key-key-${account}-0`,
          type: 'KeyUpdated',
          data: { key_id: `key-${account}-0`, name: 'renamed' },
          metadata: { at: new Date(at).toISOString() },
        },
      ]);
    }
  }
  return out;
}

/**
 * Appends each group as one append to its stream, in order, and resolves once readAll shows the
 * last of them: the PostgreSQL store reads only below the oldest transaction still running in
 * the cluster (so it never skips one that commits late), and a test run in parallel with others
 * sharing the server may hold that back for a moment after the append returned.
 */
export async function appendMoneyLog(store: EventStore, groups: AppendedEvent[][]): Promise<void> {
  let before: Position = START;
  let last: Position = START;
  for (const group of groups) {
    const events: NewEvent[] = group.map((e) => ({ id: randomUUID(), type: e.type, data: e.data, metadata: e.metadata }));
    before = last;
    last = (await store.append(group[0].stream, events, 'any')).position;
  }
  const deadline = Date.now() + 10_000;
  while (!(await store.readAll({ after: before })).some((e) => e.position === last)) {
    if (Date.now() > deadline) throw new Error(`the appended events are not readable after 10 s (last at ${last})`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** The instant the export counts an appended event at, by the rule stated in the issue. */
export function appendedInstant(e: AppendedEvent): number {
  return Date.parse(e.type === 'UsageCharged' && typeof e.data.charged_at === 'string' ? e.data.charged_at : e.metadata.at);
}
