/**
 * The error object of spec section 2.1 and the statuses of section 7. Every 4XX/5XX body the
 * service writes is built from an ApiError.
 */
export type ErrorType =
  | 'invalid_request_error'
  | 'authentication_error'
  | 'insufficient_quota'
  | 'permission_error'
  | 'not_found_error'
  | 'idempotency_conflict'
  | 'model_retired'
  | 'rate_limit_error'
  | 'api_error'
  | 'service_unavailable';

export interface ErrorBody {
  error: { message: string; type: ErrorType; code: string | null; param: string | null };
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly type: ErrorType,
    message: string,
    readonly code: string | null = null,
    readonly param: string | null = null,
    /** Extra response headers, e.g. retry-after on 429. */
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }

  /** The function `renamingParam`, for the callers that still reach it through ApiError. */
  static renamingParam(err: unknown, from: string, param: string): unknown {
    return renamingParam(err, from, param);
  }

  toBody(): ErrorBody {
    return { error: { message: this.message, type: this.type, code: this.code, param: this.param } };
  }

  static invalidRequest(message: string, param: string | null = null, code: string | null = null): ApiError {
    return new ApiError(400, 'invalid_request_error', message, code, param);
  }

  static authentication(message = 'Missing or invalid API key.', code: string | null = 'invalid_api_key'): ApiError {
    return new ApiError(401, 'authentication_error', message, code);
  }

  static permission(message: string, code: string | null = null): ApiError {
    return new ApiError(403, 'permission_error', message, code);
  }

  static notFound(message: string, code: string | null = null, param: string | null = null): ApiError {
    return new ApiError(404, 'not_found_error', message, code, param);
  }

  static internal(message = 'The server had an error while processing the request.'): ApiError {
    return new ApiError(500, 'api_error', message, 'internal_error');
  }
}

/**
 * What kind of refusal a DomainError is, or of failure the request is not to blame for. A library
 * says what went wrong and about which field; the edge alone turns the kind into the spec's status
 * and error type (`apiErrorOf`).
 */
export type ErrorKind =
  /** The request breaks a rule (spec 7: 400). */
  | 'invalid'
  /** No valid credential (401). */
  | 'unauthenticated'
  /** A valid credential that may not do this (403). */
  | 'forbidden'
  /** What the request names does not exist for the caller (404). */
  | 'not_found'
  /**
   * The client stopped taking what it was sent (408): the service cut the exchange rather than
   * keep its resources open for a reader that does not read.
   */
  | 'client_timeout'
  /** It exists already, or its state does not allow this (409). */
  | 'conflict'
  /** The model asked for is retired (410, spec 9). */
  | 'retired'
  /** What was sent is larger than allowed (413). */
  | 'too_large'
  /** Too many attempts for now; `details.retryAfterSeconds` says when to try again (429). */
  | 'rate_limited'
  /**
   * A fault of the service itself, not the request's (500): a wiring or configuration error
   * found while serving it. The message says what, for the operator reading the answer.
   */
  | 'internal'
  /** Every model provider tried failed (spec 7: 502). */
  | 'upstream_failed'
  /** A capability of the service is missing or down, not the request's fault (503). */
  | 'unavailable'
  /** Every model provider tried failed, the last by timing out (spec 7: 504). */
  | 'upstream_timeout';

/**
 * A rule of the domain said no: a stable `code` (null where the spec's body carries none), a
 * message for the caller, the field it concerns (`details.param`) and its kind. No status: that
 * is the edge's to choose, one mapping for every library.
 */
export class DomainError extends Error {
  override readonly name = 'DomainError';
  constructor(
    readonly code: string | null,
    message: string,
    readonly details: Record<string, unknown> = {},
    readonly kind: ErrorKind = 'invalid',
  ) {
    super(message);
  }

  /** The request field the refusal concerns, or null. */
  get param(): string | null {
    return typeof this.details.param === 'string' ? this.details.param : null;
  }

  // The factories take their arguments in the order of the ApiError factory each replaced.
  static invalid(message: string, param: string | null = null, code: string | null = null): DomainError {
    return new DomainError(code, message, { param }, 'invalid');
  }

  static unauthenticated(message: string, code: string | null): DomainError {
    return new DomainError(code, message, {}, 'unauthenticated');
  }

  static forbidden(message: string, code: string | null = null): DomainError {
    return new DomainError(code, message, {}, 'forbidden');
  }

  static notFound(message: string, code: string | null = null, param: string | null = null): DomainError {
    return new DomainError(code, message, { param }, 'not_found');
  }

  static conflict(message: string, code: string | null, param: string | null = null): DomainError {
    return new DomainError(code, message, { param }, 'conflict');
  }

  static unavailable(message: string, code: string | null): DomainError {
    return new DomainError(code, message, {}, 'unavailable');
  }

  /**
   * A fault found while serving (a provider not configured, a route gone from the catalog): code
   * `internal_error` as on every 500, and a message that says what, as ApiError.internal's did.
   */
  static internal(message: string): DomainError {
    return new DomainError('internal_error', message, {}, 'internal');
  }
}

/**
 * `err` naming `param` instead of `from`, when it is an ApiError or a DomainError naming `from`;
 * otherwise `err` as it is. For a rule written for one field (`model`) applied to another (an
 * engine, a fallback).
 */
export function renamingParam(err: unknown, from: string, param: string): unknown {
  if (err instanceof ApiError && err.param === from) return new ApiError(err.status, err.type, err.message, err.code, param, err.headers);
  if (err instanceof DomainError && err.param === from) return new DomainError(err.code, err.message, { ...err.details, param }, err.kind);
  return err;
}

const STATUS_OF: Record<ErrorKind, readonly [number, ErrorType]> = {
  invalid: [400, 'invalid_request_error'],
  unauthenticated: [401, 'authentication_error'],
  forbidden: [403, 'permission_error'],
  not_found: [404, 'not_found_error'],
  client_timeout: [408, 'invalid_request_error'],
  conflict: [409, 'invalid_request_error'],
  retired: [410, 'model_retired'],
  too_large: [413, 'invalid_request_error'],
  rate_limited: [429, 'rate_limit_error'],
  internal: [500, 'api_error'],
  upstream_failed: [502, 'api_error'],
  unavailable: [503, 'service_unavailable'],
  upstream_timeout: [504, 'api_error'],
};

/**
 * The spec's error object (section 2.1) and status (section 7) of a domain error, by its kind:
 * the HTTP edge's mapping, with the ledger's own refusals decided before it (the gateway's
 * error mapping). Code, param and message pass through unchanged.
 */
export function apiErrorOf(err: DomainError): ApiError {
  const [status, type] = STATUS_OF[err.kind];
  const retryAfter = err.details.retryAfterSeconds;
  const headers: Record<string, string> = typeof retryAfter === 'number' ? { 'retry-after': String(retryAfter) } : {};
  return new ApiError(status, type, err.message, err.code, err.param, headers);
}

/**
 * The error object a caller is shown for `err` when it is one of the service's own refusals (an
 * ApiError, or a DomainError mapped by its kind); null for anything else.
 */
export function refusalOf(err: unknown): ApiError | null {
  if (err instanceof ApiError) return err;
  if (err instanceof DomainError) return apiErrorOf(err);
  return null;
}

/** Node's and PostgreSQL's ways of saying a connection could not be made or was lost. */
const CONNECTION_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);
const CONNECTION_MESSAGES =
  /Connection terminated|connection error and is not queryable|timeout exceeded when trying to connect|Query read timeout|not queryable/i;

/**
 * A dependency (PostgreSQL) that is down or restarting, not a fault of the request: SQLSTATE
 * class 08 (connection exception), 57P01-57P03 (shutting down, starting up), 53300 (too many
 * connections), 25006 (a write reached a standby: during a failover the proxy may route to the
 * node being promoted a moment before it takes writes), or the driver's own connection errors.
 */
export function isConnectionFailure(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown } | null;
  const code = typeof e?.code === 'string' ? e.code : '';
  if (code.startsWith('08') || ['57P01', '57P02', '57P03', '53300', '25006'].includes(code) || CONNECTION_CODES.has(code)) return true;
  return err instanceof Error && CONNECTION_MESSAGES.test(err.message);
}
