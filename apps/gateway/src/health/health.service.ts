import { Inject, Injectable } from '@nestjs/common';
import { EVENT_STORE, START, type EventStore, type Position } from '@svc/eventstore';
import { CLOCK, CONFIG, EDGE_STORES, READ_DB, type Clock, type Config, type EdgeStores, type SqlRunner } from '@svc/platform';
import { PROJECTIONS, projectionLag, type ProjectionRunner } from '@svc/projections';

/** Dependencies whose outage the gateway rides out: their failure degrades readiness, never fails it. */
const SERVES_WITHOUT = new Set(['redis']);

/** How long each dependency has to answer before the probe calls it down. */
export const CHECK_TIMEOUT_MS = 1_000;

export interface CheckResult {
  status: 'ok' | 'fail';
  /** Why it failed, in a few words: an error's message with any credentials removed, never a URL's password. */
  reason?: string;
  [detail: string]: unknown;
}

export interface Readiness {
  /**
   * `degraded`: only a dependency the gateway serves without is down (Redis: limits fall back
   * to each process's memory, docs/api/endpoints.md "When Redis is unreachable"). Still 200, so an outage of
   * Redis does not take every gateway out of service at once.
   */
  status: 'ready' | 'degraded' | 'not_ready';
  checks: Record<string, CheckResult>;
}

/**
 * The readiness probe's checks (issue 22): the read-model database, Redis and EventStoreDB when
 * configured, and the projections' lag. Each gets CHECK_TIMEOUT_MS; they run at once, so the
 * probe answers within about that long whatever is down.
 */
@Injectable()
export class HealthService {
  constructor(
    @Inject(READ_DB) private readonly sql: SqlRunner,
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(PROJECTIONS) private readonly projections: Pick<ProjectionRunner, 'projections'>,
    @Inject(CLOCK) private readonly clock: Clock,
    @Inject(CONFIG) private readonly config: Pick<Config, 'eventstoreUrl' | 'readyMaxLagSeconds'>,
    @Inject(EDGE_STORES) private readonly edge: Pick<EdgeStores, 'backend' | 'ping'>,
  ) {}

  async readiness(): Promise<Readiness> {
    const checks: [string, () => Promise<Omit<CheckResult, 'status'> | void>][] = [
      [
        'postgres',
        async () => {
          await this.sql.query('SELECT 1');
          return { backend: this.sql.dialect === 'pglite' ? 'pglite' : 'postgresql' };
        },
      ],
    ];
    // Only where this process uses Redis (REDIS_URL set, in a process that serves requests).
    if (this.edge.backend === 'redis') checks.push(['redis', () => this.edge.ping(CHECK_TIMEOUT_MS)]);
    // Without EVENTSTORE_URL the events are in the postgres check's database.
    if (this.config.eventstoreUrl !== null) {
      // A stream nobody writes: reading it is one round trip that finds nothing.
      checks.push(['eventstore', async () => void (await this.store.readStream('health-probe', { maxCount: 1 }))]);
    }
    checks.push(['projections', () => this.projectionLag()]);
    const results = await Promise.all(checks.map(async ([name, check]) => [name, await run(check)] as const));
    const failed = results.filter(([, r]) => r.status !== 'ok').map(([name]) => name);
    const status = failed.length === 0 ? 'ready' : failed.every((name) => SERVES_WITHOUT.has(name)) ? 'degraded' : 'not_ready';
    return { status, checks: Object.fromEntries(results) };
  }

  /**
   * How far the slowest projection is behind the log, from the checkpoints in the read-model
   * database. Read the same way in every process: in the all-in-one process (`npm start`) the
   * runner is this process's, in a production gateway (which runs none) it is the worker's, and
   * what is measured is what this gateway's answers read, the read models as the worker left
   * them. A worker that is down or stuck for longer than the bound therefore makes every gateway
   * not ready: their read models (balances, keys, revocations) are that stale. Measured in time,
   * not in events: see projectionLag.
   */
  private async projectionLag(): Promise<Omit<CheckResult, 'status'> & { ok: boolean }> {
    const names = this.projections.projections.map((p) => p.name);
    const { rows } = await this.sql.query<{ name: string; position: Position }>(
      'SELECT name, position FROM projection_checkpoints WHERE name = ANY($1::text[])',
      [names],
    );
    const at = new Map(rows.map((r) => [r.name, r.position]));
    let slowest: { name: string; position: Position } | null = null;
    for (const name of names) {
      const position = at.get(name) ?? START;
      if (slowest === null || position < slowest.position) slowest = { name, position };
    }
    const [pending] = slowest === null ? [] : await this.store.readAll({ after: slowest.position, maxCount: 1 });
    const max = this.config.readyMaxLagSeconds;
    const lag = projectionLag(pending ? pending.metadata : null, this.clock.now(), max);
    return {
      ok: lag.ok,
      ...(lag.ok ? {} : { reason: `projection ${slowest!.name} is ${lag.lagSeconds} s behind the event log (the bound is ${max} s)` }),
      lag_seconds: lag.lagSeconds,
      max_lag_seconds: max,
      ...(pending && slowest ? { slowest: slowest.name } : {}),
    };
  }
}

/** Runs one check within CHECK_TIMEOUT_MS; a check may say it failed by returning `ok: false`. */
async function run(check: () => Promise<(Omit<CheckResult, 'status'> & { ok?: boolean }) | void>): Promise<CheckResult> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer in ${CHECK_TIMEOUT_MS} ms`)), CHECK_TIMEOUT_MS);
  });
  try {
    const { ok = true, ...details } = (await Promise.race([check(), late])) ?? {};
    return { status: ok ? 'ok' : 'fail', ...details };
  } catch (err) {
    return { status: 'fail', reason: reasonOf(err) };
  } finally {
    clearTimeout(timer);
  }
}

/**
 * An error in a few words for an unauthenticated caller: the message (or, for a connection
 * error without one, its code), any `user:password@` of a URL cut out, at most 160 characters.
 */
export function reasonOf(err: unknown): string {
  const e = err as { message?: unknown; code?: unknown; name?: unknown } | null;
  const text = (
    typeof e?.message === 'string' && e.message.trim() !== ''
      ? e.message
      : typeof e?.code === 'string'
        ? e.code
        : typeof e?.name === 'string'
          ? e.name
          : String(err)
  )
    .replace(/([a-z][a-z0-9+.-]*:\/\/)[^/\s@]*@/gi, '$1')
    .replace(/password=\S*/gi, 'password=***')
    .replace(/\s+/g, ' ')
    .trim();
  return text.length > 160 ? `${text.slice(0, 157)}...` : text;
}
