/** The error objects (spec 2.1): the gateway's own, and Anthropic's shape on /v1/messages*. */
import { constant, extension, nullable, obj, oneOfValues, str } from '../json-schema';

/** Spec 2.1: every 4XX/5XX body. */
export const ErrorObject = obj(
  {
    error: obj(
      {
        message: str(),
        type: str(
          'spec 7: invalid_request_error, authentication_error, insufficient_quota, permission_error, not_found_error, idempotency_conflict, model_retired, rate_limit_error, api_error, service_unavailable',
        ),
        code: nullable(str('machine-readable reason, e.g. model_not_found, unsupported_parameter')),
        param: nullable(str('the request field at fault, e.g. messages[0].content')),
      },
      { required: ['message', 'type'] },
    ),
  },
  { description: 'Spec 2.1: the error object of every 4XX/5XX answer.' },
);

/** Spec 2.1 and 4.3: on /v1/messages* errors take Anthropic's shape; our `code` and `param` ride along when set. */
export const AnthropicError = obj(
  {
    type: constant('error'),
    error: obj(
      {
        type: oneOfValues([
          'invalid_request_error',
          'authentication_error',
          'billing_error',
          'permission_error',
          'not_found_error',
          'request_too_large',
          'rate_limit_error',
          'api_error',
          'overloaded_error',
          'timeout_error',
        ]),
        message: str(),
        code: extension(str()),
        param: extension(str()),
      },
      { required: ['type', 'message'] },
    ),
  },
  { description: "Anthropic's error shape (spec 4.3)." },
);
