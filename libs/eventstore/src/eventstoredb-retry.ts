/**
 * What the EventStoreDB adapter does when a call fails while a cluster changes leader: the
 * decision is a pure function of (failure kind, attempt, elapsed), the adapter only applies it.
 */

/**
 * - `not-leader`: the node refused because it is not the leader, and named the one it believes
 *   is; the client has already reconnected there, so the call can be repeated at once.
 * - `unavailable`, `deadline`, `timeout`, `cancelled`: the connection broke, the call ran out of
 *   time, the server gave up on the write's replication, or dropped a long-running call (as it
 *   does to subscriptions when it loses leadership). The outcome of an append is then unknown.
 * - `discovery`: gossip found no member in the preferred state (an election in progress), or
 *   reached no seed.
 * - `other`: anything else (a refusal, a wrong expected version, a bug): repeating cannot help.
 */
export type FailureKind = 'not-leader' | 'unavailable' | 'deadline' | 'timeout' | 'cancelled' | 'discovery' | 'other';

export interface RetryPolicy {
  /** No attempt starts once this long (ms) has passed since the first one began. */
  budgetMs: number;
  /** The wait after the first failure; each next one doubles, up to maxDelayMs. */
  firstDelayMs: number;
  maxDelayMs: number;
}

/**
 * An EventStoreDB election normally completes within a few seconds (gossip, then a vote), so
 * 10 s covers one with room to spare while a caller (a request) still gets an answer in time.
 */
export const DEFAULT_RETRY_POLICY: RetryPolicy = { budgetMs: 10_000, firstDelayMs: 100, maxDelayMs: 1_000 };

export type RetryDecision = { retry: true; afterMs: number } | { retry: false };

/**
 * `attempt`: how many attempts have failed so far (1 after the first); `elapsedMs`: since the
 * first attempt began. Retries only what a leader change or a lost connection causes; waits
 * nothing after the first not-leader (the client knows where the leader is), else backs off.
 */
export function retryDecision(kind: FailureKind, attempt: number, elapsedMs: number, policy: RetryPolicy = DEFAULT_RETRY_POLICY): RetryDecision {
  if (kind === 'other') return { retry: false };
  const afterMs = kind === 'not-leader' && attempt === 1 ? 0 : Math.min(policy.maxDelayMs, policy.firstDelayMs * 2 ** (attempt - 1));
  if (elapsedMs + afterMs >= policy.budgetMs) return { retry: false };
  return { retry: true, afterMs };
}

/**
 * Where, if anywhere, the events with `ids` sit in a stream's tail (`tail`, in stream order),
 * together and in order: the revision of the last of them, or null. This is how a retried append
 * whose first answer was lost (the old leader wrote it, then the connection went) is recognised
 * as done rather than written twice.
 */
export function revisionOfAppended(ids: readonly string[], tail: ReadonlyArray<{ id: string; revision: bigint }>): bigint | null {
  if (ids.length === 0) return null;
  for (let start = tail.length - ids.length; start >= 0; start--) {
    if (ids.every((id, i) => tail[start + i]!.id === id)) return tail[start + ids.length - 1]!.revision;
  }
  return null;
}

/**
 * The last failure of an operation that was given up on: its message says how long it was
 * tried; `type` is the client's error type for the last failure's kind, so that
 * storeUnavailable() treats it as the outage it is, and `cause` is that failure.
 */
export class EventStoreDbUnavailableError extends Error {
  override readonly name = 'EventStoreDbUnavailableError';
  readonly type: string;
  constructor(
    readonly operation: string,
    readonly attempts: number,
    readonly elapsedMs: number,
    kind: FailureKind,
    cause: unknown,
  ) {
    super(
      `EventStoreDB: ${operation} failed ${attempts} time(s) over ${elapsedMs} ms, the last with: ${cause instanceof Error ? cause.message : String(cause)}`,
      { cause },
    );
    this.type = ERROR_TYPE[kind];
  }
}

/** The client's ErrorType for each kind; a failed discovery is the cluster being unavailable. */
const ERROR_TYPE: Record<FailureKind, string> = {
  'not-leader': 'not-leader',
  unavailable: 'unavailable',
  deadline: 'deadline-exceeded',
  timeout: 'timeout',
  cancelled: 'cancelled',
  discovery: 'unavailable',
  other: 'unknown',
};
