/** The overview's figures, shaped from the API's answers; pure, so the spec can pin them. */
import { usedShare, utcDay } from '../format';
import type { ActivityRow, KeyRecord, LimitReset } from '../records';

/**
 * Sums USD amounts in whole nano-dollars (the API's own unit), so adding 0.1 and 0.2 gives 0.3
 * and a total matches what the ledger charged to the last digit.
 */
export function sumUsd(amounts: number[]): number {
  let nano = 0;
  for (const amount of amounts) nano += Math.round(amount * 1e9);
  return nano / 1e9;
}

export interface SpendTotals {
  today: number;
  month: number;
  /**
   * The first day of the month that the activity covers: activity reaches back 30 days, so on
   * the 31st the 1st is no longer in it. Null when the whole month so far is covered.
   */
  monthFrom: string | null;
}

/** Spend of today's UTC date and of this UTC month, from the activity of the last 30 days. */
export function spendTotals(rows: ActivityRow[], now: Date, days: string[]): SpendTotals {
  const today = utcDay(now);
  const month = today.slice(0, 7);
  const firstOfMonth = `${month}-01`;
  const covered = days.filter((d) => d.startsWith(month));
  return {
    today: sumUsd(rows.filter((r) => r.date === today).map((r) => r.usage)),
    month: sumUsd(rows.filter((r) => r.date.startsWith(month)).map((r) => r.usage)),
    monthFrom: covered.length > 0 && covered[0] !== firstOfMonth ? covered[0] : null,
  };
}

/** One bar of the chart: a day and the spend of each model on it (0 where none). */
export interface DayBar {
  day: string;
  spend: Record<string, number>;
}

export interface SpendSeries {
  /** Models with spend in the period, largest total first (the bottom of the stack). */
  models: string[];
  bars: DayBar[];
}

/** Daily spend per model over `days`, endpoints of a model added together. */
export function dailySpendSeries(rows: ActivityRow[], days: string[]): SpendSeries {
  const inPeriod = new Set(days);
  const nano = new Map<string, Map<string, number>>();
  const totals = new Map<string, number>();
  for (const row of rows) {
    if (!inPeriod.has(row.date) || row.usage <= 0) continue;
    const amount = Math.round(row.usage * 1e9);
    const byModel = nano.get(row.date) ?? new Map<string, number>();
    byModel.set(row.model, (byModel.get(row.model) ?? 0) + amount);
    nano.set(row.date, byModel);
    totals.set(row.model, (totals.get(row.model) ?? 0) + amount);
  }
  const models = [...totals.keys()].sort((a, b) => totals.get(b)! - totals.get(a)! || a.localeCompare(b));
  const bars = days.map((day) => ({
    day,
    spend: Object.fromEntries(models.map((m) => [m, (nano.get(day)?.get(m) ?? 0) / 1e9])),
  }));
  return { models, bars };
}

/** One line of the chart's table: a day with spend, a model and what it cost. */
export interface SpendLine {
  day: string;
  model: string;
  cost: number;
}

/** The chart as a table: the days with spend, newest first, then models as the chart stacks them. */
export function spendLines(series: SpendSeries): SpendLine[] {
  const lines: SpendLine[] = [];
  for (const bar of [...series.bars].reverse()) {
    for (const model of series.models) {
      const cost = bar.spend[model];
      if (cost > 0) lines.push({ day: bar.day, model, cost });
    }
  }
  return lines;
}

export type Level = 'ok' | 'warn' | 'bad';

/** A key's spend against its limit in the current window, or `limit: null` for none. */
export interface KeyLimit {
  id: string;
  name: string;
  hint: string;
  limit: number | null;
  period: LimitReset;
  /** Spent in the limit's current window. */
  used: number;
  /** Spent since the key was made. */
  lifetime: number;
  remaining: number | null;
  share: number | null;
  level: Level;
  resetsAt: string | null;
}

/** The share of a limit at which the gateway sends its spend-cap warning (docs/api/account.md: 80%). */
export const WARN_SHARE = 0.8;

const WINDOW_USAGE: Record<LimitReset, keyof Pick<KeyRecord, 'usage' | 'usage_daily' | 'usage_weekly' | 'usage_monthly'>> = {
  daily: 'usage_daily',
  weekly: 'usage_weekly',
  monthly: 'usage_monthly',
  never: 'usage',
};

/**
 * The keys that can still spend, with their use of their limit: limited keys first, fullest
 * first, then the unlimited ones by name. Revoked keys spend nothing more and are left out.
 */
export function keyLimits(keys: KeyRecord[]): KeyLimit[] {
  const limits = keys
    .filter((k) => !k.revoked)
    .map((k): KeyLimit => {
      // A limit of 0 lets nothing through: it is as used up as a full one.
      const share = k.limit === 0 ? 1 : usedShare(k.limit, k.limit_remaining);
      return {
        id: k.id,
        name: k.name || k.id,
        hint: k.hint,
        limit: k.limit,
        period: k.limit_reset,
        used: k[WINDOW_USAGE[k.limit_reset]],
        lifetime: k.usage,
        remaining: k.limit_remaining,
        share,
        level: share === null || share < WARN_SHARE ? 'ok' : share < 1 ? 'warn' : 'bad',
        resetsAt: k.limit_resets_at,
      };
    });
  return limits.sort((a, b) => (b.share ?? -1) - (a.share ?? -1) || a.name.localeCompare(b.name));
}

/** A share as a whole percentage that never says 0% of something spent nor 100% short of the limit. */
export function percent(share: number): string {
  if (share <= 0) return '0%';
  if (share < 0.01) return '<1%';
  if (share >= 1) return '100%';
  return `${Math.min(99, Math.round(share * 100))}%`;
}

/** Colours 3:1 or more against white (WCAG 1.4.11), told apart by hue: the first ten models'. */
export const MODEL_COLOURS = ['#1d4ed8', '#c2410c', '#047857', '#7c3aed', '#be123c', '#0e7490', '#4d7c0f', '#a21caf', '#475569', '#b45309'];

/**
 * A colour for each model of the chart, none shared: the palette first, then hues a golden angle
 * apart, each darkened until it keeps 3:1 against white, since two models in one colour would
 * read as one in the stack and its legend.
 */
export function modelColours(models: readonly string[]): string[] {
  const used = new Set<string>();
  return models.map((_, i) => {
    if (i < MODEL_COLOURS.length) {
      used.add(MODEL_COLOURS[i]);
      return MODEL_COLOURS[i];
    }
    const hue = ((i - MODEL_COLOURS.length) * 137.508 + 15) % 360;
    // Alternate saturations keep neighbours in the golden sequence apart in more than hue.
    const saturation = i % 2 ? 70 : 55;
    for (let lightness = 42; ; lightness -= 1) {
      const colour = hslHex(hue, saturation, lightness);
      if (contrastOnWhite(colour) >= 3 && !used.has(colour)) {
        used.add(colour);
        return colour;
      }
    }
  });
}

function hslHex(h: number, s: number, l: number): string {
  const a = (s / 100) * Math.min(l / 100, 1 - l / 100);
  const channel = (n: number) => {
    const k = (n + h / 30) % 12;
    const v = l / 100 - a * Math.max(-1, Math.min(k - 3, 9 - k, 1));
    return Math.round(v * 255)
      .toString(16)
      .padStart(2, '0');
  };
  return `#${channel(0)}${channel(8)}${channel(4)}`;
}

/** The WCAG contrast ratio of a #rrggbb colour against white. */
export function contrastOnWhite(hex: string): number {
  const [r, g, b] = [1, 3, 5].map((i) => {
    const c = parseInt(hex.slice(i, i + 2), 16) / 255;
    return c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  });
  const luminance = 0.2126 * r + 0.7152 * g + 0.0722 * b;
  return 1.05 / (luminance + 0.05);
}
