import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { BUILTIN_CATALOG_PATH, type Catalog, loadCatalog } from '@svc/catalog';
import { AggregateStore, openEventStoreDb, SqlEventStore, upcastWith } from '@svc/eventstore';
import type { EventStore } from '@svc/eventstore';
import { type Clock, ConfigError, createEdgeStores, type EdgeStores, PgliteSqlRunner, PgSqlRunner, type SqlRunner, systemClock } from '@svc/platform';
import type { Config } from '@svc/platform';
import { projectionLag as lagOf, ProjectionRunner } from '@svc/projections';
import { AuthCache, authCacheCoordination, initAuthCacheLeases } from '@svc/identity';
import { ALL_PROJECTIONS } from './projections';
import { decideOnAccount, GatewayLease, initInFlight, PEER_BATCH_TIMEOUT_MS, upcastAccountEvent } from '@svc/ledger';
import { PromptLogs, StoredImages, StoredResponses } from '@svc/conversations';
import { SqlFileStore } from '@svc/files';
import { BatchLines } from '@svc/batches';
import { VideoJobs } from '@svc/videos';
import { JobQueue } from '@svc/jobs';
import { NoticeMailer, upgradeWebhookClaims } from '@svc/webhooks';
import { createProvider, type Simulator, startSimulator } from '@svc/providers';
import { ServiceMetrics, startMetricsServer } from '@svc/metrics';
import type { Provider } from '@svc/providers';
import { Tracing } from '@svc/telemetry';
import { Agent } from 'undici';
import { PeerRouting } from './peer-routing';
import { PeerLedger } from './peer-ledger';

/**
 * Everything a process of the service needs, wired from the configuration: the read-model
 * database, the event store, the projection runner, the catalog and the upstream clients.
 * The gateway, the worker, `npm start` and the CLI all build one of these.
 */
export interface Runtime {
  readonly config: Config;
  readonly clock: Clock;
  readonly sql: SqlRunner;
  /** The hot standby of DATABASE_READ_URL for pure read-model reads; null without one (they read `sql`). */
  readonly replicaSql: SqlRunner | null;
  readonly store: EventStore;
  readonly aggregates: AggregateStore;
  readonly projections: ProjectionRunner;
  readonly catalog: Catalog;
  /** The upstream client of each catalog provider, by name, in that provider's wire format. */
  readonly providers: ReadonlyMap<string, Provider>;
  /** Base URL of the in-process simulated upstream, when this process started one. */
  readonly simulatorUrl: string | null;
  /** That simulated upstream (tests read what it received). */
  readonly simulator: Simulator | null;
  /** Bearer token of the operator API; null disables it. */
  readonly adminToken: string | null;
  /** Rate limits, idempotency and the response cache: on Redis when REDIS_URL or REDIS_CLUSTER_NODES is set, else in memory. */
  readonly edge: EdgeStores;
  /** Keys by secret hash, in processes that serve requests unless SVC_AUTH_CACHE=off. */
  readonly authCache: AuthCache | null;
  /** The lease of a process that serves requests (its holds are reaped once it lapses); null in the worker and the CLI. */
  readonly gatewayLease: GatewayLease | null;
  /**
   * Issue 45: which peer serves a contended account's requests (SVC_PEER_FORWARDING); null when
   * off, and in processes that serve no request.
   */
  readonly peerRouting: PeerRouting | null;
  /** Issue 45: the contended accounts' commands handed to their owners (SVC_PEER_FORWARDING=on or ledger); null otherwise. */
  readonly peerLedger: PeerLedger | null;
  /** This process's Prometheus metrics (issue 22), on a registry of its own. */
  readonly metrics: ServiceMetrics;
  /** The port of the separate metrics server (SVC_METRICS_PORT) once bound; null when /metrics is on the main port. */
  readonly metricsPort: number | null;
  /** OpenTelemetry spans over OTLP (issue 22); null, and nothing created, without OTEL_EXPORTER_OTLP_ENDPOINT. */
  readonly tracing: Tracing | null;
  close(): Promise<void>;
}

/**
 * A projection woken by an append waits this long for more before it reads: a read model lags
 * by up to this much more, and under load the worker does a fraction of the transactions. A
 * read of one's own write does not wait for it (ProjectionRunner.waitFor asks for a catch-up).
 */
const PROJECTION_COALESCE_MS = 20;
/**
 * The same wait while appends keep coming (ProjectionRunner's busyCoalesceMs). Against 60 ms,
 * 250 took 13-28% off the CPU the worker and PostgreSQL spend per request under a
 * 64-connection load (docs/BENCHMARKS.md, fifth round).
 */
const PROJECTION_BUSY_COALESCE_MS = 250;

/** Every event this process reads is read through the upcasters of the contexts, once, by the store. */
const EVENT_UPCASTER = upcastWith(upcastAccountEvent);

export interface RuntimeOptions {
  clock?: Clock;
  /** PGlite in memory instead of in the data directory (tests). */
  inMemory?: boolean;
  /** False for processes that never call a model (worker, CLI): no upstream clients, no simulator. */
  withProviders?: boolean;
  /**
   * False for processes that call models but serve no request (the worker running batch lines):
   * no auth cache, no serving lease, no Redis. Default: whether it has providers.
   */
  servesRequests?: boolean;
  /** Overrides SVC_ADMIN_TOKEN (the dev setup generates one). */
  adminToken?: string | null;
}

export async function createRuntime(config: Config, options: RuntimeOptions = {}): Promise<Runtime> {
  const closers: Closers = [];
  const close = async () => {
    for (const c of closers.reverse()) await c().catch(() => undefined);
  };
  try {
    // Closed last: the spans of whatever the other closers finish are exported before the exit.
    const tracing = config.tracing ? Tracing.otlp(config.tracing) : null;
    if (tracing) closers.push(() => tracing.shutdown());
    const sql = await openReadDb(config, options.inMemory ?? false, closers);
    const replicaSql = await openReplicaDb(config, closers);
    const clock = options.clock ?? systemClock;
    const { metrics, store } = await openEventStore(config, sql, clock, closers);
    const withProviders = options.withProviders ?? true;
    const servesRequests = options.servesRequests ?? withProviders;
    const { projections, authCache } = await openProjections(sql, store, servesRequests && config.authCache, closers);
    await initContentTables(sql);
    const gatewayLease = servesRequests ? await startGatewayLease(sql, closers) : null;
    const peerRouting =
      gatewayLease && config.peerForwarding
        ? new PeerRouting(gatewayLease.id, () => gatewayLease.peers, clock, config.peerForwarding.handOver === 'ledger')
        : null;
    const catalog = loadCatalog(config.catalogPath ?? BUILTIN_CATALOG_PATH);
    const simulator = withProviders && catalog.usesSimulator() && config.simulatorUrl === null ? await startOwnSimulator(closers) : null;
    const providers = upstreamClients(withProviders ? catalog.models : [], simulator?.url ?? config.simulatorUrl, config);
    const edge = await openEdgeStores(config, servesRequests, clock, closers);
    const metricsPort = config.metricsPort === null ? null : await startOwnMetricsServer(config, config.metricsPort, metrics, closers);
    const aggregates = new AggregateStore(store, clock, peerRouting ? { onLostRace: (stream) => peerRouting.noteLostRace(stream) } : {});
    const peerLedger =
      peerRouting && gatewayLease && config.peerForwarding?.handOver === 'ledger'
        ? openPeerLedger(gatewayLease, peerRouting, aggregates, metrics, clock, closers)
        : null;
    return {
      config,
      clock,
      sql,
      replicaSql,
      store,
      aggregates,
      projections,
      catalog,
      providers,
      simulatorUrl: simulator?.url ?? null,
      simulator,
      adminToken: options.adminToken === undefined ? config.adminToken : options.adminToken,
      edge,
      authCache,
      gatewayLease,
      peerRouting,
      peerLedger,
      metrics,
      metricsPort,
      tracing,
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}

function openPeerLedger(
  lease: GatewayLease,
  routing: PeerRouting,
  aggregates: AggregateStore,
  metrics: ServiceMetrics,
  clock: Clock,
  closers: Closers,
): PeerLedger {
  // Kept connections: a batch is small and frequent, and a new connection would cost more than it.
  const agent = new Agent({ keepAliveTimeout: 30_000, headersTimeout: PEER_BATCH_TIMEOUT_MS, bodyTimeout: PEER_BATCH_TIMEOUT_MS });
  closers.push(() => agent.close());
  const warn = (message: string) => console.warn(message);
  return new PeerLedger(
    { id: lease.id, token: lease.peerToken },
    routing,
    agent,
    clock,
    (c) => decideOnAccount(aggregates, c.accountId, c.command, c.metadata, warn),
    (outcome, commands) => metrics.peerLedgerCommands.inc({ outcome }, commands),
  );
}

/** What a runtime opened, to be closed in reverse order. */
type Closers = (() => Promise<void>)[];

async function openEventStore(config: Config, sql: SqlRunner, clock: Clock, closers: Closers): Promise<{ metrics: ServiceMetrics; store: EventStore }> {
  // Every append timed and every charge counted, whatever the adapter: one decorator here rather than one per adapter.
  const metrics: ServiceMetrics = new ServiceMetrics({ sql, projectionLag: () => projectionLag(sql, store, clock) });
  const store: EventStore = metrics.observed(
    config.eventstoreUrl ? openEventStoreDb(config.eventstoreUrl, { upcast: EVENT_UPCASTER }) : new SqlEventStore(sql, { upcast: EVENT_UPCASTER }),
  );
  closers.push(() => store.close());
  await store.init();
  return { metrics, store };
}

async function openProjections(
  sql: SqlRunner,
  store: EventStore,
  withAuthCache: boolean,
  closers: Closers,
): Promise<{ projections: ProjectionRunner; authCache: AuthCache | null }> {
  let authCache: AuthCache | null = null;
  const projections = new ProjectionRunner(sql, store, ALL_PROJECTIONS, {
    coalesceMs: PROJECTION_COALESCE_MS,
    busyCoalesceMs: PROJECTION_BUSY_COALESCE_MS,
    caches: authCacheCoordination(sql, () => authCache),
  });
  closers.push(() => projections.stop());
  await projections.init();
  // Every process on PostgreSQL has the lease table: writers read it even where nothing caches.
  if (sql.dialect === 'postgres') await initAuthCacheLeases(sql);
  if (withAuthCache) {
    const opened = (authCache = await AuthCache.open(sql));
    closers.push(() => opened.close());
  }
  return { projections, authCache };
}

// Content, not a projection: a rebuild of the read models never touches it.
export async function initContentTables(sql: SqlRunner): Promise<void> {
  // The job table first: each kind's own tables move what they still hold into it.
  await JobQueue.init(sql);
  await StoredResponses.init(sql);
  await SqlFileStore.init(sql);
  await BatchLines.init(sql);
  await VideoJobs.init(sql);
  await StoredImages.init(sql);
  await PromptLogs.init(sql);
  await upgradeWebhookClaims(sql);
  await NoticeMailer.init(sql);
  await initInFlight(sql);
}

async function startGatewayLease(sql: SqlRunner, closers: Closers): Promise<GatewayLease> {
  const lease = new GatewayLease(sql);
  await lease.start();
  closers.push(() => lease.stop());
  return lease;
}

async function startOwnSimulator(closers: Closers): Promise<Simulator> {
  const started = await startSimulator({ port: 0 });
  closers.push(() => started.close());
  return started;
}

/** One client per catalog provider, shared by every model it serves; `simulator` is the simulated upstream's URL. */
function upstreamClients(models: Catalog['models'], simulatorUrl: string | null, config: Config): Map<string, Provider> {
  const providers = new Map<string, Provider>();
  for (const model of models) {
    for (const { provider } of model.providers) {
      if (providers.has(provider.name)) continue;
      const baseUrl = provider.baseUrl === 'simulator' ? (simulatorUrl as string) : provider.baseUrl;
      const options = { baseUrl, apiKey: provider.apiKey, timeoutMs: config.upstreamTimeoutMs, dialect: provider.dialect };
      providers.set(provider.name, createProvider(provider.adapter, options));
    }
  }
  return providers;
}

async function openEdgeStores(config: Config, servesRequests: boolean, clock: Clock, closers: Closers): Promise<EdgeStores> {
  // Only processes that serve requests talk to Redis; the worker and the CLI never do.
  const edge = createEdgeStores({
    redisUrl: servesRequests ? config.redisUrl : null,
    redisClusterNodes: servesRequests ? config.redisClusterNodes : null,
    clock,
    // Issue 41 S4: cached answers are sealed like prompt logs; no key, no cache.
    cacheKey: config.encryptionKey,
    onDegraded: (what, err) =>
      console.warn(`${what}: Redis is unreachable (${err instanceof Error ? err.message : String(err)}); serving degraded until it returns`),
  });
  closers.push(() => edge.close());
  // Without this the first requests after start would find Redis still connecting, and run degraded.
  await edge.ready(2_000);
  return edge;
}

/**
 * SVC_METRICS_PORT: /metrics on a port of its own, in every process: a worker's are the
 * charges of its jobs and its reaper, and the projections it runs.
 */
async function startOwnMetricsServer(config: Config, port: number, metrics: ServiceMetrics, closers: Closers): Promise<number> {
  const server = await startMetricsServer(metrics, port, config.host);
  closers.push(() => server.close());
  return server.port;
}

/**
 * Each projection's lag at scrape time, in events and in seconds (the age of the first event it
 * has not applied, as the readiness probe measures it): one read of the checkpoints, then one
 * count and one read per distinct checkpoint (normally one: the projections move together).
 */
async function projectionLag(sql: SqlRunner, store: EventStore, clock: Clock): Promise<{ name: string; lag: number; seconds: number | null }[]> {
  const { rows } = await sql.query<{ name: string; position: string }>('SELECT name, position FROM projection_checkpoints');
  const behind = new Map<string, Promise<{ lag: number; seconds: number | null }>>();
  const measure = async (position: string) => {
    const [lag, [pending]] = await Promise.all([store.countEventsAfter(position), store.readAll({ after: position, maxCount: 1 })]);
    return { lag, seconds: lagOf(pending ? pending.metadata : null, clock.now(), Infinity).lagSeconds };
  };
  const at = (position: string) => {
    let m = behind.get(position);
    if (!m) behind.set(position, (m = measure(position)));
    return m;
  };
  return Promise.all(rows.map(async (r) => ({ name: r.name, ...(await at(r.position)) })));
}

async function openReadDb(config: Config, inMemory: boolean, closers: (() => Promise<void>)[]): Promise<SqlRunner> {
  let sql: SqlRunner;
  if (config.databaseUrl) sql = await openPostgres(config.databaseUrl, config);
  else if (inMemory) sql = await PgliteSqlRunner.open();
  else {
    const dir = embeddedDbDir(config.dataDir);
    mkdirSync(dir, { recursive: true });
    // PGlite is one process's database: a second process opening the same files corrupts them.
    const release = lockDataDir(config.dataDir);
    closers.push(async () => release());
    sql = await PgliteSqlRunner.open(dir);
  }
  closers.push(() => sql.close());
  return sql;
}

/**
 * DATABASE_READ_URL: a pool on the standby, named in pg_stat_activity. A standby that cannot be
 * reached sends reads to the primary: the connect is bounded so that finding out is quick.
 */
async function openReplicaDb(config: Config, closers: Closers): Promise<SqlRunner | null> {
  if (!config.databaseReadUrl) return null;
  const sql = await PgSqlRunner.connect({ connectionString: config.databaseReadUrl, application_name: 'svc-replica-reads', connectionTimeoutMillis: 1_000 });
  closers.push(() => sql.close());
  return sql;
}

/**
 * The statement pool on DATABASE_URL and the sessions on DATABASE_SESSION_URL (docs/operations.md,
 * "Connections per process"). A session URL of its own means DATABASE_URL is a pooler in
 * transaction mode: statements are then not prepared under names, and both must reach the same
 * database and schema, or NOTIFYs would go unheard and revoked keys stay cached.
 */
async function openPostgres(databaseUrl: string, config: Config): Promise<PgSqlRunner> {
  const sessionUrl = config.databaseSessionUrl;
  const sql = await PgSqlRunner.connect(
    { connectionString: databaseUrl, max: config.databasePoolMax },
    sessionUrl === null ? {} : { session: { connectionString: sessionUrl }, namedStatements: false },
  );
  if (sessionUrl === null) return sql;
  try {
    const { statements, session } = await sql.targets();
    if (statements !== session) {
      throw new ConfigError('DATABASE_SESSION_URL', `reaches ${session} (database.schema), but DATABASE_URL reaches ${statements}; they must be the same`);
    }
    return sql;
  } catch (err) {
    await sql.close();
    throw err;
  }
}

/** Where the embedded PGlite cluster lives in a data directory. */
export function embeddedDbDir(dataDir: string): string {
  return join(dataDir, 'pglite');
}

export class DataDirInUseError extends Error {
  override readonly name = 'DataDirInUseError';
}

/** A pid file in the data directory; a stale one (its process gone) is taken over. */
function lockDataDir(dataDir: string): () => void {
  const path = join(dataDir, 'svc.pid');
  try {
    const pid = Number(readFileSync(path, 'utf8'));
    if (pid !== process.pid && isAlive(pid)) {
      throw new DataDirInUseError(
        `${dataDir} is in use by process ${pid} (embedded PGlite allows one process). Stop it first, or set DATABASE_URL to share a PostgreSQL server.`,
      );
    }
  } catch (err) {
    if (err instanceof DataDirInUseError) throw err;
  }
  writeFileSync(path, String(process.pid));
  return () => rmSync(path, { force: true });
}

function isAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
