import { Client } from 'pg';
import { DomainError, StreamContentionError } from '@svc/eventstore';
import { freePort } from '@svc/platform/edge/testing/redis-server';
import { ProjectionTimeoutError } from '@svc/projections';
import { ProviderError } from '@svc/providers';
import { toApiError } from './error-mapping';

const NOW = new Date('2026-11-24T10:00:00Z');

/** The error a real pg client raises for `run`, whatever it is. */
async function pgError(run: () => Promise<unknown>): Promise<unknown> {
  return run().then(
    () => {
      throw new Error('expected a failure');
    },
    (err: unknown) => err,
  );
}

/**
 * Issue 14.9: a PostgreSQL restart once answered 500 internal_error. A database that is down
 * or drops a connection is the service's fault, not the request's: 503 with retry-after.
 */
describe('error mapping of dependency outages (spec 7)', () => {
  it('answers 503 database_unavailable for a database that refuses connections', async () => {
    const port = await freePort();
    const err = await pgError(async () => {
      const client = new Client({ connectionString: `postgres://postgres@127.0.0.1:${port}/postgres` });
      await client.connect();
    });
    const apiError = toApiError(err, NOW);
    expect([apiError.status, apiError.type, apiError.code, apiError.headers['retry-after']]).toEqual([503, 'service_unavailable', 'database_unavailable', '1']);
  });

  it('answers 503 for a connection the server terminated mid-query', async () => {
    const victim = new Client({ connectionString: process.env.DATABASE_URL });
    const killer = new Client({ connectionString: process.env.DATABASE_URL });
    await Promise.all([victim.connect(), killer.connect()]);
    victim.on('error', () => undefined);
    try {
      const pid = (await victim.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0].pid;
      const err = await pgError(async () => {
        const sleeping = victim.query('SELECT pg_sleep(10)');
        await new Promise((resolve) => setTimeout(resolve, 100));
        await killer.query('SELECT pg_terminate_backend($1)', [pid]);
        await sleeping;
      });
      expect(toApiError(err, NOW).toBody().error).toMatchObject({ type: 'service_unavailable', code: 'database_unavailable' });
      // And the next query on the dead client, which pg refuses without reaching the server.
      const after = await pgError(() => victim.query('SELECT 1'));
      expect(toApiError(after, NOW).status).toBe(503);
    } finally {
      await killer.end();
      await victim.end().catch(() => undefined);
    }
  });

  it('answers 503 projections_behind when a write could not be confirmed visible in time', () => {
    const apiError = toApiError(new ProjectionTimeoutError('projections identity did not reach 1 in 5000 ms'), NOW);
    expect([apiError.status, apiError.code]).toEqual([503, 'projections_behind']);
  });

  // Issue 41 A: a hot account's lost races once answered 500 internal_error.
  it('answers 503 account_busy with retry-after when the account is too contended to decide the request', () => {
    const apiError = toApiError(new StreamContentionError('account-a', 51), NOW);
    expect([apiError.status, apiError.type, apiError.code, apiError.headers['retry-after']]).toEqual([503, 'service_unavailable', 'account_busy', '1']);
  });

  it('keeps 500 for what nobody expected, and names the field a domain refusal names', () => {
    expect(toApiError(new TypeError("Cannot read properties of undefined (reading 'x')"), NOW).status).toBe(500);
    const refusal = toApiError(new DomainError('invalid_key_settings', 'name has a value a key cannot have.', { param: 'name' }), NOW);
    expect(refusal.toBody().error).toMatchObject({ type: 'invalid_request_error', code: 'invalid_key_settings', param: 'name' });
  });

  // Issue 15.5: one documented mapping of upstream failures (docs/api/endpoints.md, "Upstream failures").
  it.each([
    [new ProviderError({ kind: 'timeout', status: 504, message: 'slow' }), 504, 'api_error', 'upstream_timeout'],
    [new ProviderError({ kind: 'http', status: 503, message: 'down' }), 503, 'service_unavailable', 'model_unavailable'],
    [new ProviderError({ kind: 'http', status: 529, message: 'overloaded' }), 503, 'service_unavailable', 'model_unavailable'],
    [new ProviderError({ kind: 'http', status: 429, message: 'rate limited' }), 503, 'service_unavailable', 'model_rate_limited'],
    [new ProviderError({ kind: 'http', status: 500, message: 'boom' }), 502, 'api_error', 'upstream_error'],
    [new ProviderError({ kind: 'network', status: 502, message: 'reset' }), 502, 'api_error', 'upstream_error'],
    [new ProviderError({ kind: 'invalid_response', status: 502, message: 'redirect' }), 502, 'api_error', 'upstream_error'],
    [new ProviderError({ kind: 'http', status: 401, message: 'operator key refused' }), 502, 'api_error', 'upstream_error'],
    [new ProviderError({ kind: 'http', status: 400, message: 'bad' }), 400, 'invalid_request_error', 'upstream_rejected'],
    [new ProviderError({ kind: 'http', status: 422, message: 'unprocessable' }), 400, 'invalid_request_error', 'upstream_rejected'],
  ])('maps %s to %i %s %s', (err, status, type, code) => {
    const apiError = toApiError(err, NOW);
    expect([apiError.status, apiError.type, apiError.code]).toEqual([status, type, code]);
  });
});
