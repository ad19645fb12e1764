import type { RecordedEvent } from '@svc/eventstore';
import { upcastAccountEvent } from './account';
import {
  csvHeader,
  csvLine,
  EXPORT_COLUMNS,
  inPeriod,
  jsonlLine,
  LedgerOptionError,
  moneyRow,
  parseAfter,
  parseFormat,
  parseInstant,
  parsePeriod,
} from './export';

let revision = 0n;
const recorded = (type: string, data: Record<string, unknown>, at: string | null = '2026-11-02T10:00:00.000Z', stream = 'account-acme'): RecordedEvent => ({
  id: `e${revision}`,
  type,
  data,
  metadata: at === null ? {} : { at },
  stream,
  revision: revision++,
  position: `00000000000000000100/${String(revision).padStart(20, '0')}`,
});

const charge = (over: Record<string, unknown> = {}) =>
  recorded('UsageCharged', {
    account_id: 'acme',
    hold_id: 'gen-1',
    key_id: 'k1',
    amount_nano: '1500000000',
    model: 'sim/echo',
    provider: 'sim',
    endpoint: '/v1/chat/completions',
    prompt_tokens: 10,
    completion_tokens: 5,
    cached_tokens: 2,
    reasoning_tokens: 0,
    latency_ms: 1,
    ttft_ms: null,
    ...over,
  });

describe('ledger export: the row of a money event', () => {
  it('given a charge, when exported, then it is one row with its key, generation, meters, provider cost and amounts: charged positive, the balance effect negative', () => {
    const row = moneyRow(
      charge({
        usage: { input: 10, output: 5 },
        provider_cost_nano: '900000001',
        lines: [{ meter: 'input', quantity: 10, unit_price_usd: '1', amount_nano: '1' }],
      }),
    )!;
    expect(row).toMatchObject({
      type: 'UsageCharged',
      account_id: 'acme',
      key_id: 'k1',
      generation_id: 'gen-1',
      model: 'sim/echo',
      provider: 'sim',
      endpoint: '/v1/chat/completions',
      amount_usd: '1.500000000',
      balance_effect_usd: '-1.500000000',
      provider_cost_usd: '0.900000001',
      byok: false,
      batch: false,
      meters: { input: 10, output: 5 },
      at: '2026-11-02T10:00:00.000Z',
    });
  });

  it('given a charge written before meters and cost lines, when exported, then its meters come through the upcaster and provider cost and batch are unknown', () => {
    // As the store reads it: through the ledger's upcaster.
    const row = moneyRow(upcastAccountEvent(charge()))!;
    // Issue 41 item 14: billed meters, so `input` is the 8 tokens not served from cache.
    expect(row.meters).toEqual({ input: 8, cached_input: 2, output: 5 });
    expect(row.provider_cost_usd).toBeNull();
    expect(row.batch).toBeNull();
  });

  it('given a BYOK charge and a batch line, when exported, then byok follows the ":byok" provider and batch the batch_discount line', () => {
    expect(moneyRow(charge({ provider: 'openai:byok' }))!.byok).toBe(true);
    expect(moneyRow(charge({ lines: [{ meter: 'batch_discount', quantity: 50, unit_price_usd: '-1', amount_nano: '-1' }] }))!.batch).toBe(true);
  });

  it('given credits and adjustments of both signs, when exported, then amount and balance effect carry the sign of the balance change', () => {
    expect(moneyRow(recorded('CreditsAdded', { account_id: 'acme', amount_nano: '10000000000', reason: 'purchase' }))).toMatchObject({
      amount_usd: '10.000000000',
      balance_effect_usd: '10.000000000',
      reason: 'purchase',
      key_id: null,
      byok: null,
      meters: null,
    });
    const note = moneyRow(
      recorded('BalanceAdjusted', {
        account_id: 'acme',
        adjustment_id: 'adj-1',
        amount_nano: '250000000',
        kind: 'credit_note',
        reason: 'outage',
        operator: 'ops',
      }),
    )!;
    expect(note).toMatchObject({ adjustment_id: 'adj-1', kind: 'credit_note', amount_usd: '0.250000000', balance_effect_usd: '0.250000000' });
    const debit = moneyRow(
      recorded('BalanceAdjusted', { account_id: 'acme', adjustment_id: 'adj-2', amount_nano: '-5', kind: 'adjustment', reason: 'x', operator: 'ops' }),
    )!;
    expect(debit).toMatchObject({ amount_usd: '-0.000000005', balance_effect_usd: '-0.000000005', balance_effect_nano: -5n });
  });

  it('given events that move no money, or a money type on another stream, when exported, then they have no row', () => {
    for (const type of ['HoldPlaced', 'HoldReleased', 'HoldExpired', 'AccountOpened', 'BalanceLow'])
      expect(moneyRow(recorded(type, { account_id: 'acme', hold_id: 'h' }))).toBeNull();
    expect(moneyRow(recorded('CreditsAdded', { amount_nano: '1' }, null, 'webhook-acme'))).toBeNull();
  });

  it('given an amount that is not a nano-USD integer, when exported, then the export stops naming the event instead of summing a wrong figure', () => {
    expect(() => moneyRow(recorded('CreditsAdded', { account_id: 'acme', amount_nano: '1.5' }))).toThrow(
      /CreditsAdded at .*account-acme.*amount_nano is not an amount in nano-USD: "1.5"/,
    );
  });
});

describe('ledger export: the period [from, to)', () => {
  const period = parsePeriod({ from: '2026-11-02', to: '2026-11-03' });

  it('includes from and excludes to, by metadata.at', () => {
    expect(inPeriod(recorded('CreditsAdded', {}, '2026-11-02T00:00:00.000Z'), period)).toBe(true);
    expect(inPeriod(recorded('CreditsAdded', {}, '2026-11-02T23:59:59.999Z'), period)).toBe(true);
    expect(inPeriod(recorded('CreditsAdded', {}, '2026-11-03T00:00:00.000Z'), period)).toBe(false);
    expect(inPeriod(recorded('CreditsAdded', {}, '2026-11-01T23:59:59.999Z'), period)).toBe(false);
  });

  it('places a charge at its charged_at when it has one, whatever its metadata.at', () => {
    expect(inPeriod(charge({ charged_at: '2026-11-03T00:00:01.000Z' }), period)).toBe(false);
    const late = { ...charge({ charged_at: '2026-11-02T00:00:01.000Z' }), metadata: { at: '2026-11-01T23:59:00.000Z' } };
    expect(inPeriod(late, period)).toBe(true);
  });

  it('counts an undated event at the beginning of time, as statements do: only a period without from has it', () => {
    expect(inPeriod(recorded('CreditsAdded', {}, null), period)).toBe(false);
    expect(inPeriod(recorded('CreditsAdded', {}, null), parsePeriod({ to: '2026-11-03' }))).toBe(true);
  });
});

describe('ledger export: options', () => {
  const refusal = (fn: () => unknown) => {
    try {
      fn();
    } catch (err) {
      expect(err).toBeInstanceOf(LedgerOptionError);
      return { option: (err as LedgerOptionError).option, message: (err as Error).message };
    }
    throw new Error('not refused');
  };

  it('reads dates and date-times as UTC unless they name an offset', () => {
    expect(parseInstant('--from', '2026-11-01').toISOString()).toBe('2026-11-01T00:00:00.000Z');
    expect(parseInstant('--from', '2026-11-01T10:30').toISOString()).toBe('2026-11-01T10:30:00.000Z');
    expect(parseInstant('--from', '2026-11-01T10:30:00+02:00').toISOString()).toBe('2026-11-01T08:30:00.000Z');
  });

  it('refuses a malformed or impossible date, naming the option', () => {
    expect(refusal(() => parsePeriod({ from: 'yesterday' }))).toEqual({ option: '--from', message: expect.stringContaining('--from is not an ISO 8601 date') });
    expect(refusal(() => parsePeriod({ to: '2026-02-30' }))).toMatchObject({ option: '--to' });
    expect(refusal(() => parsePeriod({ to: '2026-11-01T24:00:00Z' }))).toMatchObject({ option: '--to' });
  });

  it('refuses from after to, and an empty period', () => {
    expect(refusal(() => parsePeriod({ from: '2026-11-02', to: '2026-11-01' })).message).toBe(
      '--from (2026-11-02T00:00:00.000Z) must be before --to (2026-11-01T00:00:00.000Z): the period is [from, to)',
    );
    expect(refusal(() => parsePeriod({ from: '2026-11-02', to: '2026-11-02T00:00:00Z' })).option).toBe('--from');
  });

  it('refuses a position that is not one, and an unknown format', () => {
    expect(parseAfter('00000000000000000001/00000000000000000002')).toBe('00000000000000000001/00000000000000000002');
    expect(refusal(() => parseAfter('42')).option).toBe('--after');
    expect(refusal(() => parseFormat('xlsx')).option).toBe('--format');
  });
});

describe('ledger export: CSV and JSON lines', () => {
  it('quotes CSV fields with commas, quotes and line breaks, and puts the meters in one JSON column', () => {
    const row = moneyRow(
      recorded('BalanceAdjusted', {
        account_id: 'a,b',
        adjustment_id: 'x',
        amount_nano: '1',
        kind: 'adjustment',
        reason: 'said "no"\nthen yes',
        operator: 'o',
      }),
    )!;
    const line = csvLine(row);
    expect(line).toContain('"a,b"');
    expect(line).toContain('"said ""no""\nthen yes"');
    expect(csvLine(moneyRow(charge({ usage: { input: 1, output: 2 } }))!)).toContain('"{""input"":1,""output"":2}"');
    expect(csvHeader().trim().split(',')).toEqual([...EXPORT_COLUMNS]);
  });

  it('writes every column on each JSON line, null where the event has no such fact', () => {
    const parsed = JSON.parse(jsonlLine(moneyRow(recorded('CreditsAdded', { account_id: 'acme', amount_nano: '1', reason: 'r' }))!));
    expect(Object.keys(parsed)).toEqual([...EXPORT_COLUMNS]);
    expect(parsed).toMatchObject({ key_id: null, meters: null, amount_usd: '0.000000001' });
  });
});
