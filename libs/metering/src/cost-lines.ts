/**
 * Issue 23, "explain a charge": the lines a charge is made of, and what the provider charges the
 * operator for the same call. Pure arithmetic on the target and the usage, so settle computes
 * it once, with no I/O. `costOf` (./targets) stays the charge; the lines are built to add up to
 * it exactly, nano for nano, including its round-ups (cost-lines.spec.ts checks both on random
 * usages and prices).
 */
import type { Catalog, ModelPrices } from '@svc/catalog';
import { BYOK_SUFFIX, type CostLine } from '@svc/ledger';
import type { Nano } from '@svc/platform';
import { costOfMeters, METERS, pricedUsage, type MeterUsage } from './meters';
import { pricesOf, type PricedTarget } from './targets';

export type { CostLine };

const PER_MILLION = 1_000_000n;

/** The exact decimal of `n` x 10^-`scale`, shortest form: (2000n, 9) -> "0.000002". */
export function decimalOf(n: bigint, scale: number): string {
  const negative = n < 0n;
  const digits = (negative ? -n : n).toString().padStart(scale + 1, '0');
  const whole = digits.slice(0, digits.length - scale);
  const fraction = digits.slice(digits.length - scale).replace(/0+$/, '');
  return `${negative && n !== 0n ? '-' : ''}${whole}${fraction ? `.${fraction}` : ''}`;
}

const line = (meter: string, quantity: bigint | number, unitPriceUsd: string, amountNano: Nano): CostLine => ({
  meter,
  quantity: Number(quantity),
  unit_price_usd: unitPriceUsd,
  amount_nano: amountNano.toString(),
});

/** What the charge rounds up, in nanos (each a nano at $0.000000001). */
const rounding = (nanos: Nano): CostLine => line('rounding', nanos, '0.000000001', nanos);

/**
 * The lines of `usage` at `prices`, in METERS order, each quantity x unit price truncated to the
 * nano, then one `rounding` line for what `costOfMeters` adds by rounding each group up once
 * (absent when nothing is rounded). Meters used but not priced show at 0. Resolves with their sum.
 */
export function meterLines(usage: MeterUsage, prices: ModelPrices): { lines: CostLine[]; total: Nano } {
  const priced = pricedUsage(usage, prices);
  const lines: CostLine[] = [];
  const exact = { tokens: 0n, characters: 0n, audio: 0n };
  const truncated = { tokens: 0n, characters: 0n, audio: 0n };
  let total = 0n;
  for (const meter of METERS) {
    const m = priced[meter];
    if (m.quantity === 0n) continue;
    const product = m.quantity * m.price;
    const amount = m.perMillion ? product / PER_MILLION : product;
    if (m.group) {
      exact[m.group] += product;
      truncated[m.group] += amount;
    }
    lines.push(line(meter, m.quantity, decimalOf(m.price, m.perMillion ? 15 : 9), amount));
    total += amount;
  }
  let up = 0n;
  for (const group of ['tokens', 'characters', 'audio'] as const) up += (exact[group] + PER_MILLION - 1n) / PER_MILLION - truncated[group];
  if (up > 0n) lines.push(rounding(up));
  return { lines, total: total + up };
}

/** A charge explained: its amount (what `costOf` charges), its lines, and the provider's cost when known. */
export interface ExplainedCharge {
  amountNano: Nano;
  lines: CostLine[];
  /** null: unknown (no `cost` in the catalog for the route, and no cost reported by the provider). */
  providerCostNano: Nano | null;
}

/**
 * The lines of the charge `costOf(target, usage, byokFeePercent)`, in the order it is computed:
 * the meters at the answering route's list prices with their rounding; a batch line's
 * `batch_discount` (quantity: the percent; `costOf` rounds the discounted price up, which is the
 * discount truncated); for BYOK a `byok_credit` of that whole amount (the account's own key
 * paid the provider) and the `byok_fee` (quantity: the percent) with its rounding; last, the
 * web searches the gateway ran (`queries` at the engine's price, never discounted or credited).
 */
export function explainCharge(target: PricedTarget, usage: MeterUsage, byokFeePercent: number): ExplainedCharge {
  const { queries = 0, ...modelOnly } = usage;
  const model = target.toolPrices ? modelOnly : usage;
  const listed = meterLines(model, pricesOf(target));
  const lines = listed.lines;
  let amount = listed.total;
  if (target.discountPercent !== undefined) {
    const off = (amount * BigInt(target.discountPercent)) / 100n;
    lines.push(line('batch_discount', target.discountPercent, decimalOf(-amount, 11), -off));
    amount -= off;
  }
  if (target.byok) {
    lines.push(line('byok_credit', 1, decimalOf(-amount, 9), -amount));
    const exact = amount * BigInt(byokFeePercent);
    const fee = exact / 100n;
    lines.push(line('byok_fee', byokFeePercent, decimalOf(amount, 11), fee));
    const up = exact % 100n === 0n ? 0n : 1n;
    if (up > 0n) lines.push(rounding(up));
    amount = fee + up;
  }
  if (target.toolPrices && queries > 0) {
    const perQuery = target.toolPrices.perQuery;
    lines.push(line('queries', queries, decimalOf(perQuery, 9), BigInt(queries) * perQuery));
    amount += BigInt(queries) * perQuery;
  }
  return { amountNano: amount, lines, providerCostNano: providerCostOf(target, usage) };
}

/**
 * What the provider charges the operator for `usage` answered by `target`: the route's catalog
 * `cost` applied to the usage (rounded up as prices are), or what the provider reported
 * (`provider_cost`, images and videos), plus the web searches at their engine's cost. 0 for the
 * model on a BYOK call: the account's own provider account paid it. null when any part is unknown,
 * so a partial figure never passes for the whole.
 */
export function providerCostOf(target: PricedTarget, usage: MeterUsage): Nano | null {
  const { queries = 0, ...modelOnly } = usage;
  const model: MeterUsage = target.toolPrices ? modelOnly : usage;
  let cost: Nano | null;
  if (target.byok) cost = 0n;
  else if (target.route.cost) cost = costOfMeters(model, target.route.cost);
  else if (model.provider_cost !== undefined && METERS.every((m) => m === 'provider_cost' || !model[m])) cost = BigInt(model.provider_cost);
  else cost = null;
  if (!target.toolPrices || queries === 0) return cost;
  const perQuery = target.toolPrices.costPerQuery;
  return cost === null || perQuery === undefined || perQuery === null ? null : cost + BigInt(queries) * perQuery;
}

/** The sum of the lines' amounts: what a reader checks against the charge. */
export function sumOfLines(lines: readonly CostLine[]): Nano {
  return lines.reduce((sum, l) => sum + BigInt(l.amount_nano), 0n);
}

/**
 * The lines of a charge recorded before issue 23 (no `lines` in its event), rebuilt from its
 * usage at the catalog's current prices: only when that reproduces the recorded amount exactly
 * (as a regular call, else as a batch line), so a price changed since, or a web search whose
 * engine price is not recorded, gives null rather than lines that do not add up.
 */
export function derivedCostLines(
  catalog: Pick<Catalog, 'get'>,
  charge: { model: string; provider: string | null; meters: MeterUsage; amountNano: Nano },
  byokFeePercent: number,
): { lines: CostLine[]; batch: boolean } | null {
  const model = catalog.get(charge.model);
  if (!model || charge.provider === null) return null;
  const byok = charge.provider.endsWith(BYOK_SUFFIX);
  const name = byok ? charge.provider.slice(0, -BYOK_SUFFIX.length) : charge.provider;
  const route = model.providers.find((r) => r.provider.name === name);
  if (!route) return null;
  const base = { model, route, byok, fields: {} };
  for (const batch of [false, true]) {
    const target: PricedTarget = batch ? { ...base, discountPercent: model.batchDiscountPercent } : base;
    const explained = explainCharge(target, charge.meters, byokFeePercent);
    if (explained.amountNano === charge.amountNano) return { lines: explained.lines, batch };
  }
  return null;
}
