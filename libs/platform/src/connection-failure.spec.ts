import { isConnectionFailure } from './errors';

/** What a caller is told 503 (retry shortly) rather than 500: the database, not the request, failed. */
describe('isConnectionFailure', () => {
  const pgError = (code: string, message = 'pg says no') => Object.assign(new Error(message), { code });

  it.each([
    ['08006', 'connection failure'],
    ['57P01', 'terminating connection due to administrator command'],
    ['57P03', 'the database system is starting up'],
    ['53300', 'too many connections'],
    // Issue 43: a failover's proxy routed the write to the standby being promoted.
    ['25006', 'cannot execute INSERT in a read-only transaction'],
    ['ECONNREFUSED', 'connect ECONNREFUSED 127.0.0.1:25000'],
  ])('takes SQLSTATE or errno %s (%s) as the database being unavailable', (code, message) => {
    expect(isConnectionFailure(pgError(code, message))).toBe(true);
  });

  it('takes the driver losing its connection as unavailable', () => {
    expect(isConnectionFailure(new Error('Connection terminated unexpectedly'))).toBe(true);
  });

  it.each([
    ['23505', 'duplicate key value violates unique constraint'],
    ['40001', 'could not serialize access'],
    ['42P01', 'relation does not exist'],
  ])('leaves %s (%s) to be what it is', (code, message) => {
    expect(isConnectionFailure(pgError(code, message))).toBe(false);
  });
});
