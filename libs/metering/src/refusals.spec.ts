import { ApiError, DomainError, refusalOf } from '@svc/platform';
import { byokKeyRejected, byokUnavailable } from './byok';
import { StreamStalled } from './stream';
import { allFailed, type Failure, operationOf, type Target } from './targets';
import { httpError, timeout } from './testing/pipeline-fixtures';

/** A target as far as a failure names it: its model and its provider. */
const target = (model: string, provider: string) => ({ model: { id: model }, route: { provider: { name: provider } } }) as unknown as Target;
const failed = (model: string, provider: string, error = httpError(503)): Failure => ({ target: target(model, provider), error });

/** What the edge answers: status, headers and the spec's error object (section 2.1). */
const answer = (err: unknown) => {
  expect(err).toBeInstanceOf(DomainError);
  const mapped = refusalOf(err)!;
  return { status: mapped.status, headers: mapped.headers, body: mapped.toBody() };
};
const expected = (error: ApiError) => ({ status: error.status, headers: error.headers, body: error.toBody() });

/**
 * The pipeline says why a call failed as a domain error; a client is shown the same status,
 * headers and error object (spec 2.1, 7) the pipeline's HTTP errors once gave it.
 */
describe("the pipeline's failures, as a client is shown them", () => {
  it('BYOK without SVC_ENCRYPTION_KEY: 503 service_unavailable byok_unavailable', () => {
    expect(answer(byokUnavailable())).toEqual(
      expected(new ApiError(503, 'service_unavailable', 'Bring-your-own-key is not available: this gateway has no SVC_ENCRYPTION_KEY.', 'byok_unavailable')),
    );
  });

  it.each([
    [401, 'authentication_error'],
    [403, 'permission_error'],
  ] as const)('the account’s own key refused with %i: the provider’s status, as %s byok_key_rejected', (status, type) => {
    const err = httpError(status);
    expect(answer(byokKeyRejected(err, 'up-a'))).toEqual(
      expected(
        new ApiError(
          status,
          type,
          `The provider up-a rejected the API key saved for this account (HTTP ${status}: ${err.upstreamMessage()}). Update or delete it with the operator API.`,
          'byok_key_rejected',
        ),
      ),
    );
  });

  it('every model tried failed: 502 api_error upstream_error, or 504 upstream_timeout when the last timed out', () => {
    const failures = [failed('x/chat', 'up-a'), failed('x/spare', 'up-b')];
    expect(answer(allFailed(failures))).toEqual(
      expected(
        new ApiError(502, 'api_error', 'Every model tried failed: x/chat via up-a (HTTP 503), x/spare via up-b (HTTP 503). Safe to retry.', 'upstream_error'),
      ),
    );
    const timedOut = [failed('x/chat', 'up-a'), failed('x/spare', 'up-b', timeout())];
    expect(answer(allFailed(timedOut))).toEqual(
      expected(
        new ApiError(
          504,
          'api_error',
          'Every model tried timed out or failed: x/chat via up-a (HTTP 503), x/spare via up-b (timeout). Safe to retry.',
          'upstream_timeout',
        ),
      ),
    );
  });

  it('one model tried: its provider’s own failure, for the edge to map', () => {
    const last = httpError(503);
    expect(allFailed([failed('x/chat', 'up-a'), failed('x/chat', 'up-b', last)])).toBe(last);
  });

  it('a stream the client stopped reading: 408 invalid_request_error stream_stalled', () => {
    expect(answer(new StreamStalled(20_000))).toEqual(
      expected(
        new ApiError(
          408,
          'invalid_request_error',
          'The client read nothing of the stream for 20 s, so it was cut here: the answer above is incomplete, and only what was delivered is billed.',
          'stream_stalled',
        ),
      ),
    );
  });

  it('a wiring fault: 500 api_error internal_error, saying what', () => {
    const provider = { chat: async () => undefined } as unknown as Target['provider'];
    const err = (() => {
      try {
        operationOf({ ...target('x/chat', 'up-a'), provider }, 'embed');
      } catch (e) {
        return e;
      }
    })();
    expect(answer(err)).toEqual(expected(ApiError.internal('up-a declares no embed operation')));
  });
});
