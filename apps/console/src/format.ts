/** How the console writes amounts and times; pure, so the tests can pin them. */
import type { LimitReset } from './records';

/**
 * USD as the API gives it (a decimal number), with enough digits that a small charge is not
 * shown as $0.00: cents from a dollar up, otherwise up to nine decimals with trailing zeros cut.
 */
export function usd(value: number | null | undefined): string {
  if (value === null || value === undefined) return '—';
  const abs = Math.abs(value);
  const sign = value < 0 ? '-' : '';
  if (abs === 0) return '$0.00';
  if (abs >= 1) return `${sign}$${abs.toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 })}`;
  const text = abs.toFixed(9).replace(/0+$/, '');
  return `${sign}$${text.length < 4 ? abs.toFixed(2) : text}`;
}

/** An ISO time or unix seconds as a short UTC date and time. */
export function when(value: string | number | null | undefined): string {
  if (value === null || value === undefined || value === '') return '—';
  const date = typeof value === 'number' ? new Date(value * 1000) : new Date(value);
  if (Number.isNaN(date.getTime())) return String(value);
  return `${date.toISOString().slice(0, 16).replace('T', ' ')} UTC`;
}

/** An ISO time to the second, in UTC: audit entries and delivery attempts a few seconds apart must read apart. */
export function atSecond(iso: string): string {
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return iso;
  return `${date.toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

/** The UTC day (YYYY-MM-DD) of a time. */
export function utcDay(date: Date): string {
  return date.toISOString().slice(0, 10);
}

/** The last `days` UTC days up to and including `today`, oldest first. */
export function lastDays(today: Date, days: number): string[] {
  const out: string[] = [];
  for (let i = days - 1; i >= 0; i--) out.push(utcDay(new Date(Date.UTC(today.getUTCFullYear(), today.getUTCMonth(), today.getUTCDate() - i))));
  return out;
}

/** A count with thousands separated, as the tables and facts show tokens and requests. */
export const count = (n: number): string => n.toLocaleString('en-US');

/** How a limit's window reads in a sentence: "daily limit", "lifetime limit". */
export function periodName(period: LimitReset): string {
  return period === 'never' ? 'lifetime' : period;
}

/** Share of a limit used, 0 to 1, or null without a limit. */
export function usedShare(limit: number | null, remaining: number | null): number | null {
  if (limit === null || remaining === null || limit <= 0) return null;
  return Math.min(1, Math.max(0, (limit - remaining) / limit));
}
