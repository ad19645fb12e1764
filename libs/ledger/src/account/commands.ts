import type { Nano } from '@svc/platform';
import type { CostLine, MeterUsage } from '../pricing';
import type { LimitReset } from '../spend-window';
import type { AdjustmentKind, BudgetScope, FreeGenerationFacts, GenerationStats, KeyLimit } from './events';

/** Most holds one ExpireHolds decision expires, so one append stays far below the store's size limit. */
export const EXPIRE_BATCH = 1000;

/** A guardrail budget that covers a request (issue 44), as the caller resolved it from the guardrail's assignments. */
export interface Budget {
  guardrailId: string;
  /** The guardrail's name, for the refusal's message. */
  name: string;
  scope: BudgetScope;
  /** The organization, member (user) or key id the guardrail is assigned to. */
  subject: string;
  limitNano: Nano;
  reset: LimitReset;
}

export interface PlaceHold {
  type: 'PlaceHold';
  /**
   * Unique per account (the gateway's random generation id). The state keeps open holds only,
   * so an id is refused while its hold is open; reusing a resolved one would start a new hold.
   */
  holdId: string;
  keyId: string;
  amountNano: Nano;
  model: string;
  endpoint: string;
  /** A hold that is never settled is expired after this long (by the worker). */
  ttlMs: number;
  /** The key's spend limit from the key record; absent or null = no key limit. */
  keyLimit?: KeyLimit | null;
  /** The request's Idempotency-Key (hashed with its API key) and body fingerprint, when it had one (issue 41 B). */
  idempotency?: { key: string; fingerprint: string };
  /** Issue 44: every guardrail budget that applies to this request (its key's, its member's, its organization's); a BYOK request leaves out those that exclude BYOK. */
  budgets?: readonly Budget[];
}

export type AccountCommand =
  | { type: 'OpenAccount'; accountId: string }
  | { type: 'AddCredits'; amountNano: Nano; reason: string }
  | PlaceHold
  | {
      type: 'ChargeUsage';
      holdId: string;
      amountNano: Nano;
      stats: GenerationStats;
      /** What `amountNano` bills, by meter: recorded with the charge. */
      usage?: MeterUsage;
      /** Issue 23: the lines `amountNano` is made of; they add up to it exactly. */
      lines?: CostLine[];
      /** Issue 23: what the provider charges the operator for the call; absent or null: unknown. */
      providerCostNano?: Nano | null;
      /**
       * What the request returned, in its own units (vectors for embeddings); absent: its
       * completion tokens. Nothing returned is not billed (spec 1 rule 3).
       */
      returned?: number;
      /** Decided by the hold reaper for a process whose lease lapsed (issue 41 D): the process may yet come back with its own charge. */
      reaped?: true;
    }
  | { type: 'ReleaseHold'; holdId: string; errorCode: string; stats?: Partial<GenerationStats>; reaped?: true }
  /** Expires the open holds whose `expires_at` is at or before now, at most `max` (default EXPIRE_BATCH). */
  | { type: 'ExpireHolds'; max?: number }
  /** The account's optional daily spend limit (PATCH /admin/accounts/{id}); null removes it. */
  | { type: 'SetDailyLimit'; limitNano: Nano | null }
  /**
   * Sent after PlaceHold was refused for a spend limit: a refusal throws, so it cannot carry the
   * KeySpendCapReached / DailyLimitReached event itself. Re-checks the hold; records nothing
   * when it would now be admitted or the event is already recorded for this window.
   */
  | { type: 'RecordLimitRefusal'; hold: PlaceHold }
  /**
   * Issue 23: an operator's credit note or adjustment. `adjustmentId` makes a retry safe: the same
   * id with the same content decides nothing, with other content it is refused.
   */
  | { type: 'AdjustBalance'; adjustmentId: string; amountNano: Nano; kind: AdjustmentKind; reason: string; operator: string }
  | ({ type: 'RecordFreeGeneration' } & FreeGenerationFacts);
