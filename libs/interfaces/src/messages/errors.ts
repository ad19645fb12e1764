/**
 * Errors: the gateway's error object -> Anthropic's error shape.
 */
import type { GatewayErrorBody } from '../types';

export type AnthropicErrorType =
  | 'invalid_request_error'
  | 'authentication_error'
  | 'billing_error'
  | 'permission_error'
  | 'not_found_error'
  | 'request_too_large'
  | 'rate_limit_error'
  | 'api_error'
  | 'timeout_error'
  | 'overloaded_error';

export interface AnthropicErrorBody {
  type: 'error';
  error: { type: AnthropicErrorType; message: string; [key: string]: unknown };
}

/**
 * Anthropic's error types by HTTP status (docs.claude.com/en/api/errors). 504 is Anthropic's
 * `timeout_error` (the SDK's GatewayTimeoutError); an unlisted 4XX is invalid_request_error, as
 * Anthropic documents, and an unlisted 5XX api_error.
 */
const TYPE_BY_STATUS: Record<number, AnthropicErrorType> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  402: 'billing_error',
  403: 'permission_error',
  404: 'not_found_error',
  413: 'request_too_large',
  429: 'rate_limit_error',
  500: 'api_error',
  502: 'api_error',
  503: 'overloaded_error',
  504: 'timeout_error',
  529: 'overloaded_error',
};

export function toAnthropicError(status: number, body: GatewayErrorBody): AnthropicErrorBody {
  const type = TYPE_BY_STATUS[status] ?? (status >= 400 && status < 500 ? 'invalid_request_error' : 'api_error');
  return anthropicError(type, body);
}

/** The gateway's error types (platform/src/errors.ts), for a mid-stream error without a status. */
const TYPE_BY_GATEWAY_TYPE: Record<string, AnthropicErrorType> = {
  invalid_request_error: 'invalid_request_error',
  authentication_error: 'authentication_error',
  insufficient_quota: 'billing_error',
  permission_error: 'permission_error',
  not_found_error: 'not_found_error',
  idempotency_conflict: 'invalid_request_error',
  model_retired: 'not_found_error',
  rate_limit_error: 'rate_limit_error',
  api_error: 'api_error',
  service_unavailable: 'overloaded_error',
};

export function anthropicErrorOfType(body: GatewayErrorBody): AnthropicErrorBody {
  return anthropicError(TYPE_BY_GATEWAY_TYPE[body.error.type] ?? 'api_error', body);
}

/** Our `code` and `param` ride along inside `error` when set; SDKs ignore fields they do not know. */
function anthropicError(type: AnthropicErrorType, body: GatewayErrorBody): AnthropicErrorBody {
  const { message, code, param } = body.error;
  return {
    type: 'error',
    error: {
      type,
      message,
      ...(code !== undefined && code !== null ? { code } : {}),
      ...(param !== undefined && param !== null ? { param } : {}),
    },
  };
}
