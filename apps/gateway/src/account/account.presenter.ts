import type { Catalog } from '@svc/catalog';
import { billedMeters, isByokProvider } from '@svc/ledger';
import { type CostLine, derivedCostLines } from '@svc/metering';
import { nanoToUsd } from '@svc/platform';
import type { ActivityRow, GenerationRow } from '@svc/ledger';

/** What explains a charge recorded before its lines were (issue 23): today's catalog and BYOK fee. */
export interface ChargeContext {
  catalog: Pick<Catalog, 'get'>;
  byokFeePercent: number;
}

/** One generation as GET /v1/generation and POST /v1/generations/lookup show it (docs/api/account.md). */
export function presentGeneration(g: GenerationRow, context: ChargeContext) {
  const charge = chargeLinesOf(g, context);
  return {
    id: g.id,
    model: g.model,
    provider: g.provider,
    endpoint: g.endpoint,
    status: g.status,
    key_id: g.keyId,
    client_request_id: g.clientRequestId,
    preset: g.preset,
    created_at: g.createdAt.toISOString(),
    finished_at: g.finishedAt?.toISOString() ?? null,
    tokens_prompt: g.promptTokens,
    tokens_completion: g.completionTokens,
    tokens_cached: g.cachedTokens,
    tokens_reasoning: g.reasoningTokens,
    total_cost: nanoToUsd(g.costNano),
    // What the charge billed, by meter (tokens, characters, images, search units...); {} when nothing was.
    usage_by_meter: billedMeters(g.meters ?? {}),
    // Issue 23: the charge line by line; the amounts add up to total_cost exactly. The provider's
    // cost (our margin) is the operator's, never shown here.
    cost_lines: charge.lines?.map(presentLine) ?? null,
    byok: isByokProvider(g.provider),
    batch: charge.batch,
    latency_ms: g.latencyMs,
    time_to_first_token_ms: g.ttftMs,
    error_code: g.errorCode,
    // Issue 15.2: a cache hit (status `cached`, cost 0) names the generation it replayed.
    cache_source_id: g.cacheSourceId,
    // Issue 44: what the guardrails' content filters found in the prompt, by guardrail and filter: counts, never text.
    guardrail_findings: g.guardrailFindings ?? [],
  };
}

/**
 * The lines of `g`'s charge: as recorded; for a charge recorded without them, rebuilt from its
 * usage when today's prices reproduce it exactly, else null; none for what cost nothing.
 */
function chargeLinesOf(g: GenerationRow, context: ChargeContext): { lines: CostLine[] | null; batch: boolean } {
  if (g.costLines) return { lines: g.costLines, batch: g.costLines.some((l) => l.meter === 'batch_discount') };
  if (g.costNano === 0n) return { lines: [], batch: false };
  const derived = derivedCostLines(
    context.catalog,
    { model: g.model, provider: g.provider, meters: g.meters ?? {}, amountNano: g.costNano },
    context.byokFeePercent,
  );
  return derived ?? { lines: null, batch: false };
}

/** USD as JSON numbers, like total_cost: a unit price finer than a nano keeps its digits. */
function presentLine(l: CostLine) {
  return { meter: l.meter, quantity: l.quantity, unit_price: Number(l.unit_price_usd), amount: nanoToUsd(BigInt(l.amount_nano)) };
}

/** One day x model x endpoint of GET /v1/activity; `key_id` when the answer covers one key. */
export function presentActivity(r: ActivityRow, keyId: string | null) {
  return {
    date: r.date,
    model: r.model,
    endpoint: r.endpoint,
    ...(keyId === null ? {} : { key_id: keyId }),
    requests: r.requests,
    requests_not_billed: r.requestsNotBilled,
    prompt_tokens: r.promptTokens,
    completion_tokens: r.completionTokens,
    cached_tokens: r.cachedTokens,
    reasoning_tokens: r.reasoningTokens,
    usage: nanoToUsd(r.costNano),
    // The meters other than tokens (characters of speech, images, search units...), where used.
    ...Object.fromEntries(Object.entries(billedMeters(r.units)).filter(([, value]) => value > 0)),
  };
}
