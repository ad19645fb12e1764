import { ApiError, apiErrorOf, DomainError, type ErrorKind, renamingParam } from './errors';

/** Spec 7: the status and error type each kind of domain error is answered with. */
describe('a domain error, as the edge answers it', () => {
  it.each<[ErrorKind, number, string]>([
    ['invalid', 400, 'invalid_request_error'],
    ['unauthenticated', 401, 'authentication_error'],
    ['forbidden', 403, 'permission_error'],
    ['not_found', 404, 'not_found_error'],
    ['client_timeout', 408, 'invalid_request_error'],
    ['conflict', 409, 'invalid_request_error'],
    ['retired', 410, 'model_retired'],
    ['too_large', 413, 'invalid_request_error'],
    ['rate_limited', 429, 'rate_limit_error'],
    ['internal', 500, 'api_error'],
    ['upstream_failed', 502, 'api_error'],
    ['unavailable', 503, 'service_unavailable'],
    ['upstream_timeout', 504, 'api_error'],
  ])('%s: %i %s, with its code, message and field unchanged', (kind, status, type) => {
    const mapped = apiErrorOf(new DomainError('some_code', 'Why.', { param: 'field' }, kind));
    expect([mapped.status, mapped.toBody()]).toEqual([status, { error: { message: 'Why.', type, code: 'some_code', param: 'field' } }]);
    expect(mapped.headers).toEqual({});
  });

  it('says when to try again when it knows (retry-after, in seconds)', () => {
    const mapped = apiErrorOf(new DomainError('too_many', 'Later.', { retryAfterSeconds: 30 }, 'rate_limited'));
    expect(mapped.headers).toEqual({ 'retry-after': '30' });
  });

  it('internal: the 500 ApiError.internal made, message included', () => {
    expect(apiErrorOf(DomainError.internal('provider p is not configured'))).toEqual(ApiError.internal('provider p is not configured'));
  });

  it('keeps its kind when the field it names is renamed', () => {
    const renamed = renamingParam(DomainError.notFound('No such model.', 'model_not_found', 'model'), 'model', 'plugins[0].engine') as DomainError;
    expect([renamed.kind, renamed.code, renamed.param]).toEqual(['not_found', 'model_not_found', 'plugins[0].engine']);
  });
});
