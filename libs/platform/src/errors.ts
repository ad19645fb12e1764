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

  /**
   * `err` naming `param` instead of `from`, when it is an ApiError naming `from`; otherwise `err`
   * as it is. For a rule written for one field (`model`) applied to another (an engine, a fallback).
   */
  static renamingParam(err: unknown, from: string, param: string): unknown {
    return err instanceof ApiError && err.param === from ? new ApiError(err.status, err.type, err.message, err.code, param, err.headers) : err;
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

/** Node's and PostgreSQL's ways of saying a connection could not be made or was lost. */
const CONNECTION_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);
const CONNECTION_MESSAGES =
  /Connection terminated|connection error and is not queryable|timeout exceeded when trying to connect|Query read timeout|not queryable/i;

/**
 * A dependency (PostgreSQL) that is down or restarting, not a fault of the request: SQLSTATE
 * class 08 (connection exception), 57P01-57P03 (shutting down, starting up), 53300 (too many
 * connections), or the driver's own connection errors.
 */
export function isConnectionFailure(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown } | null;
  const code = typeof e?.code === 'string' ? e.code : '';
  if (code.startsWith('08') || ['57P01', '57P02', '57P03', '53300'].includes(code) || CONNECTION_CODES.has(code)) return true;
  return err instanceof Error && CONNECTION_MESSAGES.test(err.message);
}
