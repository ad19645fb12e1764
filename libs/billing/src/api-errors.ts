import { storeUnavailable, StreamContentionError } from '@svc/eventstore';
import { isLimitRefusal, PeerUnavailableError } from '@svc/ledger';
import { ApiError, apiErrorOf, DomainError, nanoToUsdString } from '@svc/platform';
import { ProviderError } from '@svc/providers';
import { ProjectionTimeoutError } from '@svc/projections';

/**
 * Turns whatever a billed call ended with into the spec's error object (section 2.1) and status
 * (section 7): the domain's refusals, the providers' failures and the service's own outages.
 * `edge` maps what only a server sees (its framework's and its body parsers' errors); it is
 * asked after the domain and the providers and before the outages, so that one order decides
 * for the HTTP edge and for a batch line alike. Only errors nobody expected become 500.
 */
export function apiErrorOfFailure(err: unknown, now: Date, edge?: (err: unknown) => ApiError | null): ApiError {
  if (err instanceof ApiError) return err;
  if (err instanceof DomainError) return fromDomain(err, now);
  if (err instanceof ProviderError) return fromProvider(err);
  const atEdge = edge?.(err);
  if (atEdge) return atEdge;
  if (err instanceof ProjectionTimeoutError) return projectionsBehind();
  if (err instanceof PeerUnavailableError) return peerUnavailable();
  // PostgreSQL's connection failures, and EventStoreDB's when a leader change outlasts the retries.
  if (storeUnavailable(err)) return outage();
  if (err instanceof StreamContentionError) return contention();
  return ApiError.internal();
}

/** The error event of a stream that broke off after its first byte. */
export function midStreamError(failure: unknown, now: Date): ApiError {
  const mapped = apiErrorOfFailure(failure, now);
  if (!(failure instanceof ProviderError)) return mapped;
  return new ApiError(
    mapped.status,
    mapped.type,
    'The model provider broke off the stream: the answer above is incomplete, and only what was delivered is billed. Safe to retry.',
    mapped.code,
  );
}

/**
 * Issue 41 A: the account's log was too busy with other writers to decide this request in time.
 * Nothing was written (no hold, no charge): the service's state, not the request, is at fault.
 */
function contention(): ApiError {
  return new ApiError(
    503,
    'service_unavailable',
    'The account is receiving too many concurrent requests to decide this one in time; nothing was held or charged. Retry shortly.',
    'account_busy',
    null,
    { 'retry-after': '1' },
  );
}

/**
 * Spec 7, 503 row: the service, not the request, is at fault, and a retry shortly after may
 * succeed. A hold that could not be written holds nothing; a charge that could not be written
 * leaves its hold to be released when it expires.
 */
function outage(): ApiError {
  return new ApiError(503, 'service_unavailable', 'The service could not reach its database; retry shortly.', 'database_unavailable', null, {
    'retry-after': '1',
  });
}

/** Issue 45: the gateway deciding the account's holds and charges was lost with this request's on their way. */
function peerUnavailable(): ApiError {
  return new ApiError(502, 'api_error', 'The gateway deciding this account stopped answering; the request may not have been carried out.', 'peer_unavailable');
}

/** A write is in the log but the read models did not show it in time (the worker is down or behind). */
function projectionsBehind(): ApiError {
  return new ApiError(
    503,
    'service_unavailable',
    'The change was recorded, but the service could not confirm in time that every gateway sees it (its worker is behind). It takes effect once the worker catches up; reading it back shows when.',
    'projections_behind',
    null,
    { 'retry-after': '5' },
  );
}

const LIMIT_MESSAGES: Record<string, string> = {
  daily_spend_cap_reached: "This key's daily spend limit is reached; it resets at 00:00 UTC.",
  weekly_spend_cap_reached: "This key's weekly spend limit is reached; it resets on Monday at 00:00 UTC.",
  monthly_spend_cap_reached: "This key's monthly spend limit is reached; it resets on the 1st at 00:00 UTC.",
  key_limit_reached: "This key's lifetime spend limit is reached.",
  daily_spend_limit_reached: "The account's daily spend limit is reached; it resets at 00:00 UTC.",
};

/**
 * Spec 7 (429 insufficient_quota row): a spend limit says when it resets, and (issue 15.5) when
 * it is not reached but this request's worst case does not fit in what is left, says that, as the
 * 402 does: a smaller max_tokens may pass now.
 */
function limitReached(err: DomainError, code: string, now: Date): ApiError {
  const resetsAt = typeof err.details.resets_at === 'string' ? Date.parse(err.details.resets_at) : NaN;
  const headers: Record<string, string> = {};
  if (!Number.isNaN(resetsAt)) headers['retry-after'] = String(Math.max(1, Math.ceil((resetsAt - now.getTime()) / 1000)));
  const { limit_nano: limit, spent_nano: spent, required_nano: required, guardrail_id: guardrail, guardrail_name: name, scope } = err.details;
  // A guardrail budget's refusal names its guardrail and layer (issue 44): the ledger's own words.
  let message = LIMIT_MESSAGES[code] ?? err.message;
  if (typeof limit === 'bigint' && typeof spent === 'bigint' && typeof required === 'bigint' && spent < limit) {
    // Not reached: saying "reached" would be wrong, and the caller can act now.
    const whose = typeof guardrail === 'string' ? ` It is the ${String(scope)} budget set by the guardrail "${String(name)}" (${guardrail}).` : '';
    const resets = typeof err.details.resets_at === 'string' ? ` or for the limit to reset at ${err.details.resets_at}` : '';
    message =
      `This request's worst case ($${nanoToUsdString(required)}: its input plus max_tokens, or 4,096 output tokens when unset) does not fit in what is left ` +
      `of the limit ($${nanoToUsdString(limit - spent)} of $${nanoToUsdString(limit)}, open requests included).${whose} ` +
      `Lower max_tokens, or wait for open requests to finish${resets}.`;
  }
  return new ApiError(429, 'insufficient_quota', message, code, null, headers);
}

/**
 * A domain error by its kind (platform's apiErrorOf), after the ledger's refusals: those carry
 * the default kind and are told apart by code, since their statuses (402, 422, a 429 that says
 * when the limit resets) are no kind's.
 */
function fromDomain(err: DomainError, now: Date): ApiError {
  return (err.kind === 'invalid' ? fromLedger(err, now) : null) ?? apiErrorOf(err);
}

function fromLedger(err: DomainError, now: Date): ApiError | null {
  if (err.code !== null && isLimitRefusal(err.code)) return limitReached(err, err.code, now);
  switch (err.code) {
    case 'insufficient_quota':
      return new ApiError(
        402,
        'insufficient_quota',
        'Your credit balance does not cover the worst case of this request (its input plus max_tokens, or 4,096 output tokens when unset). Top up or lower max_tokens.',
        'insufficient_quota',
      );
    case 'account_not_found':
      return ApiError.permission('The account of this key does not exist.', 'account_not_found');
    // Issue 41 B: the account's own record of an Idempotency-Key (spec 7: 409 while running).
    case 'idempotency_conflict':
    case 'idempotency_completed':
      return new ApiError(409, 'idempotency_conflict', err.message, err.code, 'Idempotency-Key');
    case 'idempotency_key_reused':
      return new ApiError(422, 'invalid_request_error', err.message, err.code, 'Idempotency-Key');
    default:
      return null;
  }
}

function fromProvider(err: ProviderError): ApiError {
  if (err.kind === 'timeout') return new ApiError(504, 'api_error', 'The model provider did not answer in time. Safe to retry.', 'upstream_timeout');
  if (err.kind === 'http' && (err.status === 503 || err.status === 529)) {
    return new ApiError(503, 'service_unavailable', 'The model is temporarily unavailable. Safe to retry.', 'model_unavailable');
  }
  // The provider's rate limit, not the caller's (spec 7's 429 rows are this service's limits):
  // the model is unavailable for now.
  if (err.kind === 'http' && err.status === 429) {
    return new ApiError(
      503,
      'service_unavailable',
      'The model provider is rate limiting requests; the model is temporarily unavailable. Safe to retry.',
      'model_rate_limited',
      null,
      { 'retry-after': '1' },
    );
  }
  if (err.kind === 'http' && !err.retryable && err.status !== 401 && err.status !== 403) {
    // The provider refused the request itself (400, 404, 422): the caller's to fix.
    return ApiError.invalidRequest(`The model provider rejected the request: ${err.upstreamMessage()}`, null, 'upstream_rejected');
  }
  return new ApiError(502, 'api_error', 'The model provider failed. Safe to retry.', 'upstream_error');
}
