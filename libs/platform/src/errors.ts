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
