import type { Nano } from '@svc/platform';

/**
 * Spend windows (spec 2.2, 3.3, 8): a key's `limit_reset` and the account's daily limit.
 * All windows are UTC: a day starts at 00:00, a week on Monday 00:00, a month on the 1st 00:00.
 * `never` is a lifetime budget: it has no window and never resets.
 */
export type LimitReset = 'daily' | 'weekly' | 'monthly' | 'never';
export type Period = Exclude<LimitReset, 'never'>;

const DAY_MS = 86_400_000;

/** Start of the `period` window that contains the instant `atMs` (epoch milliseconds). */
export function windowStartMs(period: Period, atMs: number): number {
  const at = new Date(atMs);
  const day = Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), at.getUTCDate());
  switch (period) {
    case 'daily':
      return day;
    case 'weekly':
      // getUTCDay() counts from Sunday = 0; the spec's week starts on Monday.
      return day - ((at.getUTCDay() + 6) % 7) * DAY_MS;
    case 'monthly':
      return Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), 1);
  }
}

/** End (exclusive) of the `period` window that contains `atMs`: the instant it resets. */
export function windowEndMs(period: Period, atMs: number): number {
  const start = windowStartMs(period, atMs);
  switch (period) {
    case 'daily':
      return start + DAY_MS;
    case 'weekly':
      return start + 7 * DAY_MS;
    case 'monthly': {
      const at = new Date(start);
      return Date.UTC(at.getUTCFullYear(), at.getUTCMonth() + 1, 1);
    }
  }
}

/** Start of the window of `reset` that contains `at`; null for a lifetime budget. */
export function windowStart(reset: LimitReset, at: Date): Date | null {
  return reset === 'never' ? null : new Date(windowStartMs(reset, at.getTime()));
}

/** When the window of `reset` that contains `at` resets; null for a lifetime budget. */
export function windowResetsAt(reset: LimitReset, at: Date): Date | null {
  return reset === 'never' ? null : new Date(windowEndMs(reset, at.getTime()));
}

/** Charges of one window; only the current window is kept, older ones live in projections. */
export interface WindowSpend {
  startMs: number;
  chargedNano: Nano;
}

/** Before any charge: a window that every real instant is after. */
export const NO_SPEND: WindowSpend = { startMs: 0, chargedNano: 0n };

/** What `window` holds for the window starting at `startMs`: nothing once it has moved on. */
export function chargedInWindow(window: WindowSpend, startMs: number): Nano {
  return window.startMs === startMs ? window.chargedNano : 0n;
}

/**
 * Adds a charge made in the window starting at `startMs`. A later window replaces the current
 * one; a charge in an earlier window (a process whose clock lags behind the boundary) belongs to
 * a window that is already closed, so the current one is left as it is.
 */
export function addToWindow(window: WindowSpend, startMs: number, amountNano: Nano): WindowSpend {
  if (startMs > window.startMs) return { startMs, chargedNano: amountNano };
  if (startMs === window.startMs) return { startMs, chargedNano: window.chargedNano + amountNano };
  return window;
}
