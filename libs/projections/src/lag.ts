/**
 * The projection lag rule of the readiness probe, pure: how old the oldest event the slowest
 * projection has not applied yet is, and whether that is within the bound.
 */
export interface ProjectionLag {
  ok: boolean;
  /**
   * Seconds between when the oldest unapplied event was decided and now; 0 when every
   * projection is at the end of the log; null when that event carries no decision time (every
   * event the aggregates append does, so this is only a log written by something else).
   */
  lagSeconds: number | null;
}

/**
 * `oldestPending`: the first event after the slowest projection's checkpoint (null: none, the
 * projections are caught up), with its `metadata.at`. The lag is measured in time, not events:
 * an event count says nothing about how stale a read model is (500 events may be 20 ms of
 * traffic), and counting them is a scan of the log on EventStoreDB. `at` is the deciding
 * process's clock, so clock skew between machines shifts the figure by that much; the bound
 * (30 s by default) is far above any skew worth having.
 *
 * Over the bound (strictly) is not ready; at it is still ready.
 */
export function projectionLag(oldestPending: { at?: unknown } | null, now: Date, maxLagSeconds: number): ProjectionLag {
  if (oldestPending === null) return { ok: true, lagSeconds: 0 };
  const at = typeof oldestPending.at === 'string' ? Date.parse(oldestPending.at) : NaN;
  // Nothing to age it by: it is pending, but how long for is unknown, and an unknown is not
  // reported as an outage (the next event decided here carries a time and is measured).
  if (Number.isNaN(at)) return { ok: true, lagSeconds: null };
  const seconds = Math.max(0, (now.getTime() - at) / 1000);
  return { ok: seconds <= maxLagSeconds, lagSeconds: Math.round(seconds * 10) / 10 };
}
