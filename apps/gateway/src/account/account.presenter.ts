import { nanoToUsd } from '@svc/platform';
import type { ActivityRow, GenerationRow } from '@svc/projections';

/** One generation as GET /v1/generation and POST /v1/generations/lookup show it (README). */
export function presentGeneration(g: GenerationRow) {
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
    usage_by_meter: g.meters ?? {},
    latency_ms: g.latencyMs,
    time_to_first_token_ms: g.ttftMs,
    error_code: g.errorCode,
    // Issue 15.2: a cache hit (status `cached`, cost 0) names the generation it replayed.
    cache_source_id: g.cacheSourceId,
  };
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
    ...Object.fromEntries(Object.entries(r.units).filter(([, value]) => value > 0)),
  };
}
