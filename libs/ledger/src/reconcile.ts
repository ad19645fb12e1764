import type { EventStore, RecordedEvent } from '@svc/eventstore';
import { START } from '@svc/eventstore';
import { type Nano, nanoToUsd9 } from '@svc/platform';
import { BYOK_SUFFIX, type ExportPeriod, inPeriod, isByokProvider, moneyRow } from './export';
import { DEFAULT_EXPORT_PAGE, readLogPages } from './export-writer';

/**
 * Reconciliation (issue 23, `cli ledger reconcile`): what accounts were charged against what the
 * providers charge the operator, per (provider, model) over a period, from the charges in the log.
 *
 * A charge's provider cost is `provider_cost_nano` on its UsageCharged; absent means unknown.
 * The margin is computed over the charges whose cost is known only (charged there minus their
 * cost), so an unknown cost never passes for a free one; the charges with an unknown cost are
 * counted and summed beside it, and listed by generation id. A BYOK call (provider recorded as
 * `<name>:byok`) runs on the account's own provider key: the provider bills the account, and
 * what the account was charged is the operator's fee, so BYOK is reported apart, fees only.
 */

export interface ReconcileGroup {
  /** The provider as recorded, without `:byok`. */
  provider: string;
  model: string;
  byok: boolean;
  requests: number;
  /** Everything the accounts were charged (for BYOK: the fees). */
  chargedNano: Nano;
  /** Charges whose provider cost is recorded, what they charged, and that cost. */
  knownRequests: number;
  chargedKnownNano: Nano;
  providerCostNano: Nano;
  unknownRequests: number;
  unknownChargedNano: Nano;
}

export interface UnknownCost {
  generationId: string;
  accountId: string;
  keyId: string | null;
  provider: string;
  model: string;
  chargedNano: Nano;
  /** The charge's instant (charged_at, else metadata.at). */
  at: string | null;
  position: string;
}

export interface Reconciliation {
  period: ExportPeriod;
  /** Operator-paid calls, by provider then model. */
  groups: ReconcileGroup[];
  /** BYOK calls: fees only; a provider cost recorded on them was borne by the account. */
  byok: ReconcileGroup[];
  totals: ReconcileGroup;
  byokTotals: ReconcileGroup;
  /** Operator-paid charges without a recorded provider cost, in log order. */
  unknown: UnknownCost[];
  /** Events read from the log. */
  scanned: number;
}

const emptyGroup = (provider: string, model: string, byok: boolean): ReconcileGroup => ({
  provider,
  model,
  byok,
  requests: 0,
  chargedNano: 0n,
  knownRequests: 0,
  chargedKnownNano: 0n,
  providerCostNano: 0n,
  unknownRequests: 0,
  unknownChargedNano: 0n,
});

/** Margin over the charges whose cost is known. */
export const marginNano = (g: ReconcileGroup): Nano => g.chargedKnownNano - g.providerCostNano;

/** Margin as a percentage of what was charged where the cost is known, 2 decimals (half away from zero); null when nothing was. */
export function marginPercent(g: ReconcileGroup): string | null {
  if (g.chargedKnownNano === 0n) return null;
  const scaled = marginNano(g) * 20_000n; // basis points, doubled to round at the half
  let half = scaled / g.chargedKnownNano;
  half += half < 0n ? -1n : 1n;
  const bp = half / 2n;
  const negative = bp < 0n;
  const abs = negative ? -bp : bp;
  return `${negative ? '-' : ''}${abs / 100n}.${(abs % 100n).toString().padStart(2, '0')}`;
}

function add(into: ReconcileGroup, g: ReconcileGroup): void {
  into.requests += g.requests;
  into.chargedNano += g.chargedNano;
  into.knownRequests += g.knownRequests;
  into.chargedKnownNano += g.chargedKnownNano;
  into.providerCostNano += g.providerCostNano;
  into.unknownRequests += g.unknownRequests;
  into.unknownChargedNano += g.unknownChargedNano;
}

/** The charges of the period, one event at a time, in log order. */
export class Reconciler {
  private readonly groups = new Map<string, ReconcileGroup>();
  private readonly unknown: UnknownCost[] = [];
  private scanned = 0;

  constructor(private readonly period: ExportPeriod) {}

  observe(event: RecordedEvent): void {
    this.scanned++;
    if ((event.type !== 'UsageCharged' && event.type !== 'UsageCorrected') || !inPeriod(event, this.period)) return;
    const row = moneyRow(event);
    if (!row) return;
    const byok = isByokProvider(row.provider);
    const recorded = row.provider ?? '(unknown)';
    const provider = byok ? recorded.slice(0, -BYOK_SUFFIX.length) : recorded;
    const model = row.model ?? '(unknown)';
    const key = JSON.stringify([byok, provider, model]);
    let group = this.groups.get(key);
    if (!group) this.groups.set(key, (group = emptyGroup(provider, model, byok)));
    // A correction (issue 41 D) adds to its generation's charge, not a request.
    const request = event.type === 'UsageCharged' ? 1 : 0;
    group.requests += request;
    group.chargedNano += row.amount_nano;
    if (row.provider_cost_nano !== null) {
      group.knownRequests += request;
      group.chargedKnownNano += row.amount_nano;
      group.providerCostNano += row.provider_cost_nano;
    } else {
      group.unknownRequests += request;
      group.unknownChargedNano += row.amount_nano;
      // The account pays the provider itself on BYOK: an unknown cost there is not the operator's.
      if (!byok) {
        const at = (event.data as { charged_at?: string }).charged_at ?? row.at;
        this.unknown.push({
          generationId: row.generation_id ?? '(none)',
          accountId: row.account_id,
          keyId: row.key_id,
          provider,
          model,
          chargedNano: row.amount_nano,
          at,
          position: row.position,
        });
      }
    }
  }

  finish(): Reconciliation {
    const order = (a: ReconcileGroup, b: ReconcileGroup) =>
      a.provider === b.provider ? (a.model < b.model ? -1 : a.model > b.model ? 1 : 0) : a.provider < b.provider ? -1 : 1;
    const all = [...this.groups.values()].sort(order);
    const groups = all.filter((g) => !g.byok);
    const byok = all.filter((g) => g.byok);
    const totals = emptyGroup('(all)', '(all)', false);
    for (const g of groups) add(totals, g);
    const byokTotals = emptyGroup('(all)', '(all)', true);
    for (const g of byok) add(byokTotals, g);
    return { period: this.period, groups, byok, totals, byokTotals, unknown: this.unknown, scanned: this.scanned };
  }
}

export async function reconcileLedger(store: EventStore, period: ExportPeriod, pageSize = DEFAULT_EXPORT_PAGE): Promise<Reconciliation> {
  const reconciler = new Reconciler(period);
  for await (const page of readLogPages(store, START, pageSize)) for (const event of page) reconciler.observe(event);
  return reconciler.finish();
}

// ---- Presenting ------------------------------------------------------------------------------

const usd = (nano: Nano) => (nano < 0n ? `-$${nanoToUsd9(-nano)}` : `$${nanoToUsd9(nano)}`);
const periodText = (p: ExportPeriod) => `[${p.from?.toISOString() ?? '-inf'}, ${p.to?.toISOString() ?? '+inf'})`;

function table(header: string[], rows: string[][]): string[] {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  // Text left, figures right.
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i < 2 ? c.padEnd(widths[i]) : c.padStart(widths[i])))
      .join('  ')
      .trimEnd();
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)];
}

/** The report for a terminal; at most `maxUnknown` generation ids (all of them are in the JSON). */
export function formatReconciliation(r: Reconciliation, maxUnknown = 20): string[] {
  const lines = [`Reconciliation ${periodText(r.period)}: ${r.totals.requests + r.byokTotals.requests} charges, ${r.scanned} events read`, ''];
  const operatorRow = (g: ReconcileGroup) => [
    g.provider,
    g.model,
    String(g.requests),
    usd(g.chargedNano),
    String(g.knownRequests),
    usd(g.chargedKnownNano),
    usd(g.providerCostNano),
    usd(marginNano(g)),
    marginPercent(g) === null ? 'n/a' : `${marginPercent(g)}%`,
    String(g.unknownRequests),
    usd(g.unknownChargedNano),
  ];
  lines.push('Operator-paid calls (margin over the charges whose provider cost is known):');
  lines.push(
    ...table(
      ['provider', 'model', 'requests', 'charged', 'cost known', 'charged (known)', 'provider cost', 'margin', 'margin %', 'cost unknown', 'charged (unknown)'],
      [...r.groups.map(operatorRow), operatorRow(r.totals)],
    ),
  );
  lines.push('', "BYOK calls (the account pays the provider; charged = the operator's fees):");
  if (r.byok.length === 0) lines.push('  none');
  else {
    const byokRow = (g: ReconcileGroup) => [g.provider, g.model, String(g.requests), usd(g.chargedNano)];
    lines.push(...table(['provider', 'model', 'requests', 'fees'], [...r.byok.map(byokRow), byokRow(r.byokTotals)]));
  }
  lines.push(
    '',
    `Generations with an unknown provider cost: ${r.unknown.length}${r.unknown.length > maxUnknown ? ` (first ${maxUnknown}; all of them with --json)` : ''}`,
  );
  for (const u of r.unknown.slice(0, maxUnknown))
    lines.push(`  ${u.generationId}  ${u.provider}  ${u.model}  ${usd(u.chargedNano)}  account ${u.accountId}  ${u.at ?? ''}`.trimEnd());
  return lines;
}

const groupJson = (g: ReconcileGroup) => ({
  provider: g.provider,
  model: g.model,
  requests: g.requests,
  charged_usd: nanoToUsd9(g.chargedNano),
  cost_known_requests: g.knownRequests,
  charged_cost_known_usd: nanoToUsd9(g.chargedKnownNano),
  provider_cost_usd: nanoToUsd9(g.providerCostNano),
  margin_usd: nanoToUsd9(marginNano(g)),
  margin_percent: marginPercent(g),
  cost_unknown_requests: g.unknownRequests,
  charged_cost_unknown_usd: nanoToUsd9(g.unknownChargedNano),
});

const byokJson = (g: ReconcileGroup) => ({ provider: g.provider, model: g.model, requests: g.requests, fees_usd: nanoToUsd9(g.chargedNano) });

/** The report as JSON: amounts in USD as strings with 9 decimals (exact), every unknown generation. */
export function reconciliationJson(r: Reconciliation): string {
  return JSON.stringify(
    {
      from: r.period.from?.toISOString() ?? null,
      to: r.period.to?.toISOString() ?? null,
      events_read: r.scanned,
      providers: r.groups.map(groupJson),
      totals: groupJson(r.totals),
      byok: r.byok.map(byokJson),
      byok_totals: byokJson(r.byokTotals),
      unknown_provider_cost: r.unknown.map((u) => ({
        generation_id: u.generationId,
        account_id: u.accountId,
        key_id: u.keyId,
        provider: u.provider,
        model: u.model,
        charged_usd: nanoToUsd9(u.chargedNano),
        at: u.at,
        position: u.position,
      })),
    },
    null,
    2,
  );
}
