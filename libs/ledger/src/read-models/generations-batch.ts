import type { GenerationStats, GuardrailFinding } from '../account';
import type { CostLine, MeterUsage } from '../pricing';
import { eventTime } from '@svc/projections';
import type { AccountRecorded, RecordedOf } from './account-recorded';

export type GenerationStatus = 'in_progress' | 'completed' | 'not_billed' | 'failed' | 'expired' | 'cached';

/** What a settlement or an expiry writes over a generation's row. */
export interface Outcome {
  status: GenerationStatus;
  cost_nano: string;
  finished_at: string;
  /** Absent on an expiry, which knows nothing of the request's usage: those columns stay. */
  usage?: {
    error_code: string | null;
    /** Null keeps the model the hold named. */
    model: string | null;
    provider: string | null;
    prompt_tokens: number;
    completion_tokens: number;
    cached_tokens: number;
    reasoning_tokens: number;
    latency_ms: number | null;
    ttft_ms: number | null;
    /** What was billed, by meter; only a charge has it. */
    meters: MeterUsage | null;
    /** Issue 23: the charge's lines, and the provider's cost; null on a charge recorded without them. */
    cost_lines: CostLine[] | null;
    provider_cost_nano: string | null;
  };
}

export interface Placed {
  id: string;
  account_id: string;
  key_id: string;
  model: string;
  endpoint: string;
  client_request_id: string | null;
  preset: string | null;
  preset_version: number | null;
  created_at: string;
  guardrail_findings: GuardrailFinding[] | null;
  outcome: Outcome | null;
}

/**
 * A batch of the generations projection folded in memory: the requests it placed with their
 * outcome, the outcomes of requests placed in earlier batches, and the free generations.
 */
export class GenerationsBatch {
  readonly placed = new Map<string, Placed>();
  /** A free generation's row, in the columns of FREE (generations.ts). */
  readonly free: unknown[][] = [];
  /** Outcomes of requests placed in earlier batches. */
  readonly settled = new Map<string, Outcome>();

  fold(e: AccountRecorded): void {
    switch (e.type) {
      case 'HoldPlaced':
        return this.holdPlaced(e);
      case 'UsageCharged':
        return this.resolve(e.data.hold_id, finished(e.data, 'completed', e.data.amount_nano, null, eventTime(e), e.data.usage ?? {}, e.data));
      // Issue 41 D: the generation as its own process charged it, after the reaper's settlement.
      case 'UsageCorrected':
        return this.resolve(e.data.hold_id, finished(e.data, 'completed', e.data.total_nano, null, eventTime(e), e.data.usage ?? {}, e.data));
      case 'HoldReleased':
        return this.resolve(
          e.data.hold_id,
          finished(e.data, e.data.reason === 'zero_completion' ? 'not_billed' : 'failed', '0', e.data.error_code ?? null, eventTime(e)),
        );
      // Never settled (the process died mid-request): nothing is known of its usage, nothing is charged.
      case 'HoldExpired':
        return this.resolve(e.data.hold_id, { status: 'expired', cost_nano: '0', finished_at: eventTime(e) });
      case 'FreeGenerationRecorded':
        return this.freeRecorded(e);
    }
  }

  private holdPlaced(e: RecordedOf<'HoldPlaced'>): void {
    const d = e.data;
    // The client's X-Client-Request-Id travels in the metadata: it is the caller's, not the ledger's.
    const clientRequestId = e.metadata.client_request_id;
    this.placed.set(d.hold_id, {
      id: d.hold_id,
      account_id: d.account_id,
      key_id: d.key_id,
      model: d.model,
      endpoint: d.endpoint,
      client_request_id: typeof clientRequestId === 'string' ? clientRequestId : null,
      preset: typeof e.metadata.preset === 'string' ? e.metadata.preset : null,
      preset_version: typeof e.metadata.preset_version === 'number' ? e.metadata.preset_version : null,
      created_at: eventTime(e),
      guardrail_findings: d.guardrail_findings ?? null,
      outcome: null,
    });
  }

  private freeRecorded(e: RecordedOf<'FreeGenerationRecorded'>): void {
    const d = e.data;
    const clientRequestId = e.metadata.client_request_id;
    this.free.push([
      d.generation_id,
      d.account_id,
      d.key_id,
      d.model ?? null,
      d.endpoint,
      d.provider ?? null,
      typeof clientRequestId === 'string' ? clientRequestId : null,
      eventTime(e),
      d.source_id ?? null,
      d.latency_ms ?? null,
    ]);
  }

  private resolve(id: string, outcome: Outcome): void {
    const row = this.placed.get(id);
    const before = row ? row.outcome : this.settled.get(id);
    // A later outcome overwrites an earlier one, except the columns it does not know.
    const usage = outcome.usage ? { ...outcome.usage, model: outcome.usage.model ?? before?.usage?.model ?? null } : before?.usage;
    const merged: Outcome = { ...outcome, usage };
    if (row) row.outcome = merged;
    else this.settled.set(id, merged);
  }
}

function finished(
  d: Partial<GenerationStats>,
  status: GenerationStatus,
  costNano: string,
  errorCode: string | null,
  at: string,
  meters: MeterUsage | null = null,
  charge?: { lines?: CostLine[]; provider_cost_nano?: string },
): Outcome {
  return {
    status,
    cost_nano: costNano,
    finished_at: at,
    usage: {
      error_code: errorCode,
      model: d.model ?? null,
      provider: d.provider ?? null,
      prompt_tokens: d.prompt_tokens ?? 0,
      completion_tokens: d.completion_tokens ?? 0,
      cached_tokens: d.cached_tokens ?? 0,
      reasoning_tokens: d.reasoning_tokens ?? 0,
      latency_ms: d.latency_ms ?? null,
      ttft_ms: d.ttft_ms ?? null,
      meters,
      cost_lines: charge?.lines ?? null,
      provider_cost_nano: charge?.provider_cost_nano ?? null,
    },
  };
}
