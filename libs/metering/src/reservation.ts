/**
 * A billed call as plain data (ARCHITECTURE section 10): what it asks to hold, the hold it was
 * given and the targets that may answer it, and what it used once done. A job or a realtime
 * session keeps these and settles them later, in another process.
 */
import type { GuardrailFinding } from '@svc/ledger';
import type { EventMetadata } from '@svc/eventstore';
import type { Caller } from '@svc/identity';
import { type Nano, randomHex } from '@svc/platform';
import type { CostLine } from './cost-lines';
import type { MeterUsage } from './meters';
import type { RoutedModel, Target, ToolPrices } from './targets';

/** A generation's id (spec 1 rule 2), also its hold's: `gen-` and 24 random hex digits. */
export const newGenerationId = (): string => `gen-${randomHex(12)}`;

/**
 * One way to answer, as plain data: which model through which provider, on whose key. Enough
 * to find the live target again in another process (see MeteredCalls.targetsOf).
 */
export interface TargetRef {
  model: string;
  provider: string;
  byok: boolean;
  fields: Record<string, unknown>;
}

/**
 * A billed call between its hold and its settlement, as plain data (ARCHITECTURE section 10):
 * a job or a realtime session can keep it and settle it later, in another process.
 */
export interface Reservation {
  /** The hold's id, and the generation's: the id the caller is given. */
  id: string;
  accountId: string;
  keyId: string;
  endpoint: string;
  /** The primary model's providers, then each fallback's, in the order to try them. */
  targets: TargetRef[];
  /** The input as the gateway counted it: billed when a provider reports no usage of its own. */
  promptTokens: number;
  /** Nano-USD held, as a decimal string (JSON has no integers past 2^53). */
  heldNano: string;
  /** The event metadata every decision of this call carries (actor, correlation, end user...). */
  metadata: EventMetadata;
  /** A batch line's (spec 1 rule 6): priced at each model's batch discount. */
  batchLine?: true;
}

/** What releasing a hold needs of its reservation: a batch line's abandoned attempt has only these. */
export type HeldReservation = Pick<Reservation, 'id' | 'accountId' | 'keyId' | 'endpoint' | 'metadata'>;

/**
 * Which of a reservation's targets answered, by name, and the server tools it ran at their
 * prices (absent when none ran): what pricing the call needs once its client is gone.
 */
export interface AnsweredBy extends Pick<TargetRef, 'model' | 'provider' | 'byok'> {
  toolPrices?: ToolPrices;
}

/**
 * A charge decided already, recorded as it stands: a video's, priced when it completed (at
 * most its hold, spec 1 rule 1) and kept on its stream. `lines` explain it, adding up to it;
 * null when they cannot, and it is recorded without them.
 */
export interface DecidedCharge {
  amountNano: Nano;
  usage: MeterUsage;
  lines: CostLine[] | null;
  providerCostNano: Nano | null;
  latencyMs: number;
  /** What the call returned; 0 is nothing, and is not billed (spec 1 rule 3). */
  returned: number;
}

/** A reservation with what this process needs to run it: live provider clients, and the caller's token window. */
export interface Metered {
  reservation: Reservation;
  targets: Target[];
  /** Response headers the reservation produced (deprecation notices, the tokens window). */
  headers: Record<string, string>;
  /** Counts output tokens against the caller's tokens per minute; absent when rate limits are off. */
  recordOutputTokens?: (tokens: number) => Promise<void>;
}

/**
 * What the edge knows of a request that its billed call records: the client's request id
 * (spec 4), and its Idempotency-Key hashed with its API key and its body's fingerprint, which
 * the account decides with the hold (issue 41 B).
 */
export interface RequestTags {
  clientRequestId?: string;
  idempotency?: { key: string; fingerprint: string };
  /** The request's admission, left to the moment its prompt is counted (see PromptAdmission). */
  admission?: PromptAdmission;
}

/**
 * Spec 8: a model call's admission (requests per minute, a concurrency slot) and its prompt's
 * count in the tokens per minute, in one decision and one round trip to the shared store, made
 * where the prompt is counted. Throws the 429 of the first limit met; resolves with the tokens
 * window's headers, or null when the request was admitted already: the edge that left a
 * request's admission to this decision admits it itself before anything else can happen to it
 * (an idempotency claim, a cached answer, an error), and the prompt is then counted alone.
 */
export type PromptAdmission = (promptTokens: number) => Promise<Record<string, string> | null>;

/**
 * The event metadata every decision of call `id` carries: ids, not content (the end user's id,
 * the client's request id, the preset), and the process whose lease vouches for the hold, so
 * that once it lapses the hold is reaped (`leaseId`: none for a job's hold).
 */
export function callMetadata(
  caller: Pick<Caller, 'keyId'>,
  plan: Pick<Plan, 'clientRequestId' | 'user' | 'preset'>,
  id: string,
  leaseId: string | undefined,
): EventMetadata {
  return {
    actor: `key:${caller.keyId}`,
    correlationId: id,
    ...(plan.clientRequestId ? { client_request_id: plan.clientRequestId } : {}),
    ...(typeof plan.user === 'string' ? { user: plan.user } : {}),
    ...(plan.preset ? { preset: plan.preset.slug, preset_version: plan.preset.version } : {}),
    ...(leaseId ? { gateway: leaseId } : {}),
  };
}

/** What a call asks to hold (spec 1 rule 1): the models that may answer, and its worst case by meter. */
export interface Plan {
  models: readonly RoutedModel[];
  /** Headers of the requested model (deprecation notices, spec 9). */
  headers: Record<string, string>;
  /** The input as the gateway counts it (tokens): counted against the tokens per minute, billed when the provider reports none. */
  promptTokens: number;
  /** The most the call may use, by meter. */
  worstCase: MeterUsage;
  endpoint: string;
  /** The end user's id (safety_identifier / user), recorded with the events. */
  user?: unknown;
  clientRequestId?: string;
  /** The preset the request used (spec 2.5), recorded with the events as the client's request id is. */
  preset?: { slug: string; version: number };
  /** Decided with the hold (see RequestTags). */
  idempotency?: RequestTags['idempotency'];
  /** Counts the prompt, admitting the request with it (see RequestTags). */
  admission?: PromptAdmission;
}

export interface ReserveOptions {
  /** Spec 8 tokens per minute; off for work outside the per-minute limits (spec 1 rule 6: batches). */
  rateLimits?: boolean;
  /**
   * Work that outlives its request (a batch line, spec 1 rule 6; a video, spec 4.15): outside
   * the per-minute limits, under the hold id its job chose (a batch line names one per attempt,
   * so its worker knows which hold is whose). No serving process's lease vouches for the hold:
   * a worker settles it, or releases it, or another worker does after a crash, within `ttlMs`.
   * `batchDiscount`: priced at each model's batch discount (a batch line's).
   */
  job?: { holdId: string; ttlMs: number; batchDiscount?: boolean };
  /** Issue 44: what the guardrails' content filters found in the prompt (counts, never text), recorded with the hold. */
  guardrailFindings?: readonly GuardrailFinding[];
}

/** What a call used and how it went, once it is done. */
export interface Settlement {
  usage: MeterUsage;
  /** Inside `output`: reported separately on the generation (spec 2.6). */
  reasoningTokens?: number;
  latencyMs: number;
  ttftMs: number | null;
  /**
   * What the call returned, in its own units (vectors, images, characters of audio...); absent:
   * its output tokens. Nothing returned is not billed (spec 1 rule 3).
   */
  returned?: number;
}
