import type { Nano } from '@svc/platform';
import { windowEndMs, windowStartMs, type LimitReset } from '../spend-window';

/** A warning fires when a window's charges reach this share of its limit: a key's, or a guardrail budget's. */
export const WARNING_PERCENT = 80n;

export const iso = (ms: number) => new Date(ms).toISOString();

/** Charges only grow within a window, so comparing before and after a charge fires a threshold once per crossing. */
export const crosses = (before: Nano, after: Nano, threshold: Nano) => before < threshold && after >= threshold;

/** The window of `reset` that contains `atMs`, as threshold events report it: no bounds for a lifetime limit. */
export function windowBounds(reset: LimitReset, atMs: number): { window_start: string | null; resets_at: string | null } {
  if (reset === 'never') return { window_start: null, resets_at: null };
  return { window_start: iso(windowStartMs(reset, atMs)), resets_at: iso(windowEndMs(reset, atMs)) };
}
