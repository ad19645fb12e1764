/** Spend windows of spec 3.3: UTC days, weeks from Monday 00:00 UTC, calendar months. */
export type WindowReset = 'daily' | 'weekly' | 'monthly' | 'never';

/** Start of the window containing `at`; null for `never` (one lifetime window). */
export function windowStart(reset: WindowReset, at: Date): Date | null {
  const y = at.getUTCFullYear();
  const m = at.getUTCMonth();
  const d = at.getUTCDate();
  switch (reset) {
    case 'daily':
      return new Date(Date.UTC(y, m, d));
    case 'weekly':
      // getUTCDay: Sunday 0 ... Saturday 6; Monday starts the week.
      return new Date(Date.UTC(y, m, d - ((at.getUTCDay() + 6) % 7)));
    case 'monthly':
      return new Date(Date.UTC(y, m, 1));
    case 'never':
      return null;
  }
}

/** When the window containing `at` ends and the next begins; null for `never`. */
export function windowResetsAt(reset: WindowReset, at: Date): Date | null {
  const start = windowStart(reset, at);
  if (start === null) return null;
  const y = start.getUTCFullYear();
  const m = start.getUTCMonth();
  const d = start.getUTCDate();
  switch (reset) {
    case 'daily':
      return new Date(Date.UTC(y, m, d + 1));
    case 'weekly':
      return new Date(Date.UTC(y, m, d + 7));
    default:
      return new Date(Date.UTC(y, m + 1, 1));
  }
}
