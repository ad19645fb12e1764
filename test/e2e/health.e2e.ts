import { randomUUID } from 'node:crypto';
import type { ChildProcess } from 'node:child_process';
import { ManualClock } from '@svc/platform';
import { freePort, startRedisServer, stopRedisServer } from '@svc/platform/edge/testing/redis-server';
import { api, type Call, startGateway, stopGateway, type StartedGateway } from '../support/gateway';
import { startPostgresServer, type PostgresServer } from '../support/postgres-server';
import { until } from '../support/until';

const root = (gw: StartedGateway): Call => api(gw.url.replace(/\/v1$/, ''));

/** Issue 22: GET /health/live and GET /health/ready. */
describe('health probes on the embedded defaults', () => {
  const ADMIN_TOKEN = 'health-admin-token-0123456789';
  const clock = new ManualClock(new Date('2026-11-02T10:00:00Z'));
  let gw: StartedGateway;
  let call: Call;

  beforeAll(async () => {
    gw = await startGateway({ SVC_ADMIN_TOKEN: ADMIN_TOKEN }, undefined, { clock });
    call = root(gw);
  }, 60_000);
  /** `svc_projection_lag_<unit>` of every projection, as /metrics shows it. */
  const lagMetric = async (unit: 'seconds' | 'events') => {
    const text = (await call('GET', '/metrics', { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).json as string;
    return [...text.matchAll(new RegExp(`^svc_projection_lag_${unit}\\{projection="([^"]+)"\\} (\\S+)$`, 'gm'))].map((m) => [m[1], Number(m[2])] as const);
  };

  afterAll(() => stopGateway(gw));

  it('live answers 200 {"status":"ok"} without a key, and without CORS headers for a browser', async () => {
    const live = await call('GET', '/health/live', { headers: { origin: 'https://example.com' } });
    expect(live.status).toBe(200);
    expect(live.json).toEqual({ status: 'ok' });
    expect(live.headers.get('cache-control')).toBe('no-store');
    expect(live.headers.get('access-control-allow-origin')).toBeNull();
    // A wrong key is not looked at either.
    expect((await call('GET', '/health/live', { key: 'sk-not-a-key' })).status).toBe(200);
  });

  it('ready answers 200 with PGlite and the projections ok, and checks neither Redis nor EventStoreDB', async () => {
    const ready = await call('GET', '/health/ready', { key: 'sk-not-a-key' });
    expect(ready.status).toBe(200);
    expect(ready.json).toEqual({
      status: 'ready',
      checks: {
        postgres: { status: 'ok', backend: 'pglite' },
        projections: { status: 'ok', lag_seconds: 0, max_lag_seconds: 30 },
      },
    });
  });

  it('ready answers 503 naming the projections once the oldest event they have not applied is over 30 s old, and 200 once they apply it', async () => {
    const { projections, store } = gw.runtime;
    await projections.stop();
    try {
      await projections.catchUpAll();
      const { position } = await store.append(
        `health-test-${randomUUID()}`,
        [{ id: randomUUID(), type: 'HealthTestNoted', data: {}, metadata: { at: clock.now().toISOString() } }],
        'no_stream',
      );

      clock.advance(30_000);
      const atBound = await call('GET', '/health/ready');
      expect(atBound.status).toBe(200);
      expect(atBound.json.checks.projections).toMatchObject({ status: 'ok', lag_seconds: 30 });

      clock.advance(1_000);
      const behind = await call('GET', '/health/ready');
      expect(behind.status).toBe(503);
      expect(behind.json.status).toBe('not_ready');
      expect(behind.json.checks.postgres).toEqual({ status: 'ok', backend: 'pglite' });
      expect(behind.json.checks.projections).toMatchObject({ status: 'fail', lag_seconds: 31, max_lag_seconds: 30 });
      expect(behind.json.checks.projections.reason).toMatch(/^projection \S+ is 31 s behind the event log \(the bound is 30 s\)$/);
      // The metrics say the same, per projection: one event, 31 s old, behind each.
      const seconds = await lagMetric('seconds');
      expect(seconds.length).toBe(projections.projections.length);
      expect(new Set(seconds.map(([, v]) => v))).toEqual(new Set([31]));
      expect(new Set((await lagMetric('events')).map(([, v]) => v))).toEqual(new Set([1]));
      // Liveness never looks at any of it.
      expect((await call('GET', '/health/live')).status).toBe(200);

      projections.start();
      await projections.waitFor(position);
      const caughtUp = await call('GET', '/health/ready');
      expect(caughtUp.status).toBe(200);
      expect(caughtUp.json.checks.projections).toEqual({ status: 'ok', lag_seconds: 0, max_lag_seconds: 30 });
      expect(new Set((await lagMetric('seconds')).map(([, v]) => v))).toEqual(new Set([0]));
    } finally {
      projections.start();
    }
  });
});

describe('health probes on a PostgreSQL server that stops', () => {
  let pg: PostgresServer;
  let gw: StartedGateway;

  beforeAll(async () => {
    pg = await startPostgresServer();
    gw = await startGateway({ DATABASE_URL: pg.url, SVC_READY_MAX_LAG_SECONDS: '120' });
  }, 90_000);

  afterAll(async () => {
    await stopGateway(gw);
    pg?.stop();
  });

  it('ready answers 503 naming PostgreSQL while it is down, never showing its URL, and 200 once it is back', async () => {
    const call = root(gw);
    const up = await call('GET', '/health/ready');
    expect(up.status).toBe(200);
    expect(up.json.checks.postgres).toEqual({ status: 'ok', backend: 'postgresql' });
    expect(up.json.checks.projections.max_lag_seconds).toBe(120);

    pg.pause();
    try {
      const down = await call('GET', '/health/ready');
      expect(down.status).toBe(503);
      expect(down.json.status).toBe('not_ready');
      expect(down.json.checks.postgres.status).toBe('fail');
      expect(down.json.checks.postgres.reason).toMatch(/\S/);
      expect(JSON.stringify(down.json)).not.toContain('postgres://');
      expect((await call('GET', '/health/live')).json).toEqual({ status: 'ok' });
    } finally {
      pg.start();
    }
    const back = await until(
      'ready once PostgreSQL is back',
      async () => {
        const r = await call('GET', '/health/ready');
        return r.status === 200 ? r : null;
      },
      10_000,
      100,
    );
    expect(back.json.checks.postgres).toEqual({ status: 'ok', backend: 'postgresql' });
  }, 60_000);
});

describe('health probes with Redis', () => {
  let redis: ChildProcess | null = null;
  let port: number;
  let gw: StartedGateway;

  beforeAll(async () => {
    port = await freePort();
    redis = await startRedisServer(port);
    gw = await startGateway({ REDIS_URL: `redis://127.0.0.1:${port}` });
  }, 60_000);

  afterAll(async () => {
    await stopGateway(gw);
    await stopRedisServer(redis);
  });

  it('ready checks Redis and, while it is down, says degraded naming it but stays 200 (the gateway serves on), ready once it is back', async () => {
    const call = root(gw);
    const up = await call('GET', '/health/ready');
    expect(up.status).toBe(200);
    expect(up.json.checks.redis).toEqual({ status: 'ok' });

    await stopRedisServer(redis);
    redis = null;
    const down = await until(
      'readiness to see Redis gone',
      async () => {
        const r = await call('GET', '/health/ready');
        return r.json.status !== 'ready' ? r : null;
      },
      10_000,
      100,
    );
    expect(down.status).toBe(200);
    expect(down.json.status).toBe('degraded');
    expect(down.json.checks.redis.status).toBe('fail');
    expect(down.json.checks.redis.reason).toMatch(/^not connected \(\w+\)$/);
    expect(down.json.checks.postgres.status).toBe('ok');
    expect((await call('GET', '/health/live')).status).toBe(200);

    redis = await startRedisServer(port);
    const back = await until(
      'ready once Redis is back',
      async () => {
        const r = await call('GET', '/health/ready');
        return r.json.status === 'ready' ? r : null;
      },
      10_000,
      100,
    );
    expect(back.json.checks.redis).toEqual({ status: 'ok' });
  }, 30_000);
});
