import type { EventStore, RecordedEvent } from '@svc/eventstore';
import { ManualClock, type SqlRunner } from '@svc/platform';
import { HealthService, reasonOf } from './health.service';

const NOW = new Date('2026-11-02T10:00:00.000Z');

/** A read-model database answering SELECT 1 and the checkpoints query from `checkpoints`. */
function fakeSql(checkpoints: Record<string, string>, fail: Error | null = null): SqlRunner {
  return {
    dialect: 'postgres',
    query: async (text: string) => {
      if (fail) throw fail;
      if (text.includes('projection_checkpoints')) return { rows: Object.entries(checkpoints).map(([name, position]) => ({ name, position })) };
      return { rows: [{ '?column?': 1 }] };
    },
  } as unknown as SqlRunner;
}

function fakeStore(log: { position: string; at?: string }[], readStream: () => Promise<unknown> = async () => []): EventStore {
  return {
    readStream,
    readAll: async ({ after = '', maxCount = Infinity } = {}) =>
      log
        .filter((e) => e.position > after)
        .slice(0, maxCount)
        .map((e) => ({ position: e.position, metadata: e.at ? { at: e.at } : {} }) as unknown as RecordedEvent),
  } as unknown as EventStore;
}

const projections = { projections: [{ name: 'credits' }, { name: 'identity' }] } as never;
const memoryEdge = { edge: { backend: 'memory' as const, ping: async () => undefined } };

function service(
  options: {
    sql?: SqlRunner;
    store?: EventStore;
    eventstoreUrl?: string | null;
    edge?: typeof memoryEdge.edge | { backend: 'redis'; ping: (ms: number) => Promise<void> };
  } = {},
) {
  return new HealthService(
    options.sql ?? fakeSql({ credits: '2', identity: '2' }),
    options.store ?? fakeStore([{ position: '1' }, { position: '2' }]),
    projections,
    new ManualClock(NOW),
    { eventstoreUrl: options.eventstoreUrl ?? null, readyMaxLagSeconds: 30 },
    options.edge ?? memoryEdge.edge,
  );
}

describe('HealthService', () => {
  it('is ready with PostgreSQL and projections only, when neither Redis nor EventStoreDB is configured', async () => {
    expect(await service().readiness()).toEqual({
      status: 'ready',
      checks: { postgres: { status: 'ok', backend: 'postgresql' }, projections: { status: 'ok', lag_seconds: 0, max_lag_seconds: 30 } },
    });
  });

  it('measures the lag from the slowest projection, and names it past the bound', async () => {
    const log = [
      { position: '1', at: new Date(NOW.getTime() - 45_000).toISOString() },
      { position: '2', at: new Date(NOW.getTime() - 10_000).toISOString() },
    ];
    const behind = await service({ sql: fakeSql({ credits: '2', identity: '' }), store: fakeStore(log) }).readiness();
    expect(behind.status).toBe('not_ready');
    expect(behind.checks.projections).toEqual({
      status: 'fail',
      reason: 'projection identity is 45 s behind the event log (the bound is 30 s)',
      lag_seconds: 45,
      max_lag_seconds: 30,
      slowest: 'identity',
    });
    // One step further, the oldest pending event is 10 s old: within the bound.
    const catching = await service({ sql: fakeSql({ credits: '2', identity: '1' }), store: fakeStore(log) }).readiness();
    expect(catching.status).toBe('ready');
    expect(catching.checks.projections).toMatchObject({ status: 'ok', lag_seconds: 10, slowest: 'identity' });
  });

  it('counts a projection without a checkpoint row as at the start of the log', async () => {
    const log = [{ position: '1', at: new Date(NOW.getTime() - 60_000).toISOString() }];
    const result = await service({ sql: fakeSql({ credits: '1' }), store: fakeStore(log) }).readiness();
    expect(result.checks.projections).toMatchObject({ status: 'fail', slowest: 'identity', lag_seconds: 60 });
  });

  it('checks Redis only when the edge stores are on it, and names it when PING fails, degraded rather than not ready', async () => {
    const down = await service({ edge: { backend: 'redis', ping: async () => Promise.reject(new Error('not connected (reconnecting)')) } }).readiness();
    expect(down.status).toBe('degraded');
    expect(down.checks.redis).toEqual({ status: 'fail', reason: 'not connected (reconnecting)' });
    expect(down.checks.postgres.status).toBe('ok');
    expect((await service({ edge: { backend: 'redis', ping: async () => undefined } }).readiness()).checks.redis).toEqual({ status: 'ok' });
  });

  it("checks EventStoreDB only when EVENTSTORE_URL is set, with a read of one stream, never showing the URL's password", async () => {
    expect((await service().readiness()).checks.eventstore).toBeUndefined();
    let read: unknown[] = [];
    const up = fakeStore([], async (...args: unknown[]) => {
      read = args;
      return [];
    });
    expect((await service({ store: up, eventstoreUrl: 'esdb://eventstore:2113?tls=false' }).readiness()).checks.eventstore).toEqual({ status: 'ok' });
    expect(read).toEqual(['health-probe', { maxCount: 1 }]);
    const down = fakeStore([], async () => Promise.reject(new Error('Failed to connect to esdb://admin:changeit@eventstore:2113: UNAVAILABLE')));
    const result = await service({ store: down, eventstoreUrl: 'esdb://admin:changeit@eventstore:2113' }).readiness();
    expect(result.status).toBe('not_ready');
    expect(result.checks.eventstore).toEqual({ status: 'fail', reason: 'Failed to connect to esdb://eventstore:2113: UNAVAILABLE' });
  });

  it('calls a dependency that does not answer within a second down, within about that long', async () => {
    const started = Date.now();
    const result = await service({ edge: { backend: 'redis', ping: () => new Promise<void>(() => undefined) } }).readiness();
    expect(result.checks.redis).toEqual({ status: 'fail', reason: 'no answer in 1000 ms' });
    expect(Date.now() - started).toBeLessThan(1_500);
  });

  it('names PostgreSQL (and the lag it can no longer read) when the database is down', async () => {
    const refused = Object.assign(new AggregateError([], ''), { code: 'ECONNREFUSED' });
    const result = await service({ sql: fakeSql({}, refused) }).readiness();
    expect(result.status).toBe('not_ready');
    expect(result.checks.postgres).toEqual({ status: 'fail', reason: 'ECONNREFUSED' });
    expect(result.checks.projections).toEqual({ status: 'fail', reason: 'ECONNREFUSED' });
  });
});

describe('reasonOf', () => {
  it('keeps the message, drops credentials of URLs and passwords in connection strings, and stays short', () => {
    expect(reasonOf(new Error('connect to redis://:s3cret@redis:6379 failed'))).toBe('connect to redis://redis:6379 failed');
    expect(reasonOf(new Error('bad dsn host=db password=hunter2 user=svc'))).toBe('bad dsn host=db password=*** user=svc');
    expect(reasonOf(new Error('x'.repeat(500)))).toHaveLength(160);
    expect(reasonOf('plain')).toBe('plain');
  });
});
