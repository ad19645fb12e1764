import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { WrongExpectedVersionError, type EventStore, type NewEvent, type RecordedEvent } from '@svc/eventstore';
import type { SqlRunner } from '@svc/platform';
import { GenerationNotes } from './generation-notes';

/** What the scrape-time gauges read: the read-model database and, when the runner can tell, each projection's lag. */
export interface MetricsSources {
  sql: SqlRunner;
  /** Per projection, events in the log after its checkpoint, and the age in seconds of the first of them (0: none; null: it has no time). */
  projectionLag?: () => Promise<readonly { name: string; lag: number; seconds: number | null }[]>;
}

/** Seconds buckets for request and upstream times: model calls run from milliseconds to minutes. */
const SECONDS_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];
/** An append is one transaction (or one gRPC call): milliseconds. */
const APPEND_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];

/**
 * Issue 22: the process's Prometheus metrics, on a registry of its own (not prom-client's
 * global one), so several gateways in one process (the tests) each count their own. Recording
 * is a counter or histogram update: O(1), no I/O on the request path; the gauges that read the
 * database run only when scraped. Labels are bounded by construction: route templates, methods,
 * statuses, catalog ids, provider names, error codes. Never a key, an account, a prompt.
 */
export class ServiceMetrics {
  readonly registry = new Registry();
  readonly httpRequests = new Counter({
    name: 'svc_http_requests_total',
    help: 'HTTP requests answered, by route template, method, status and requested catalog model ("" when none or not in the catalog).',
    labelNames: ['route', 'method', 'status', 'model'] as const,
    registers: [this.registry],
  });
  readonly httpDuration = new Histogram({
    name: 'svc_http_request_duration_seconds',
    help: 'Time from request received to response finished, by route template and method.',
    labelNames: ['route', 'method'] as const,
    buckets: SECONDS_BUCKETS,
    registers: [this.registry],
  });
  readonly upstreamDuration = new Histogram({
    name: 'svc_upstream_duration_seconds',
    help: 'Time of one upstream provider call (until its answer, or its stream, starts), by provider and operation.',
    labelNames: ['provider', 'operation'] as const,
    buckets: SECONDS_BUCKETS,
    registers: [this.registry],
  });
  readonly upstreamErrors = new Counter({
    name: 'svc_upstream_errors_total',
    help: 'Upstream provider calls that failed, by provider and code (upstream_<status>, timeout, network, invalid_response, error).',
    labelNames: ['provider', 'code'] as const,
    registers: [this.registry],
  });
  readonly charges = new Counter({
    name: 'svc_charges_total',
    help: 'Charges recorded by this process (UsageCharged events appended), whatever decided them.',
    registers: [this.registry],
  });
  readonly chargedNano = new Counter({ name: 'svc_charged_nano_usd_total', help: 'Nano-USD those charges amount to.', registers: [this.registry] });
  readonly rateLimitRefusals = new Counter({
    name: 'svc_rate_limit_refusals_total',
    help: 'Requests refused by a rate limit (429), by error code.',
    labelNames: ['code'] as const,
    registers: [this.registry],
  });
  readonly readModelReads = new Counter({
    name: 'svc_read_model_reads_total',
    help: 'Reads of the read models that may use the standby (DATABASE_READ_URL), by where they were answered: replica or primary.',
    labelNames: ['source'] as const,
    registers: [this.registry],
  });
  readonly lostRaces = new Counter({
    name: 'svc_event_store_lost_races_total',
    help: 'Appends refused because another process had appended to the stream since this one read it (several gateways writing one account).',
    registers: [this.registry],
  });
  readonly lockedAppends = new Counter({
    name: 'svc_event_store_locked_appends_total',
    help: "Appends made under the stream's lock after lost races (a turn that holds a transaction across round trips).",
    registers: [this.registry],
  });
  readonly peerForwards = new Counter({
    name: 'svc_peer_forwards_total',
    help: 'Requests handed to the peer gateway that serves their account (SVC_PEER_FORWARDING=requests), by outcome: forwarded, unreachable (served here instead), or lost (dropped mid-request; a 502).',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });
  readonly peerLedgerCommands = new Counter({
    name: 'svc_peer_ledger_commands_total',
    help: 'Holds and charges of contended accounts handed to the peer gateway that decides them (SVC_PEER_FORWARDING=on or ledger), by outcome: forwarded, unreachable (decided here instead), or lost (the batch dropped once sent; retried as a lost store connection is).',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });
  readonly eventStoreAppend = new Histogram({
    name: 'svc_event_store_append_seconds',
    help: 'Time of one append to the event store (successful or not).',
    buckets: APPEND_BUCKETS,
    registers: [this.registry],
  });

  constructor(sources: MetricsSources) {
    const { sql } = sources;
    const registers = [this.registry];
    // One query for both: the credits read model's totals over every account.
    const holds = async () => {
      const { rows } = await sql.query<{ holds: string | number | null; held: string | number | null }>(
        'SELECT COALESCE(SUM(open_holds), 0) AS holds, COALESCE(SUM(held_nano), 0) AS held FROM credit_accounts',
      );
      return { holds: Number(rows[0]?.holds ?? 0), held: Number(rows[0]?.held ?? 0) };
    };
    // Both gauges are collected in one scrape: they share the query.
    const shared = oncePerScrape(holds);
    new Gauge({
      name: 'svc_open_holds',
      help: 'Holds placed and not yet charged, released or expired, over every account (credits read model).',
      registers,
      async collect() {
        this.set((await shared()).holds);
      },
    });
    new Gauge({
      name: 'svc_held_nano_usd',
      help: 'Nano-USD held by open holds, over every account (credits read model).',
      registers,
      async collect() {
        this.set((await shared()).held);
      },
    });
    new Gauge({
      name: 'svc_webhook_backlog',
      help: 'Webhook deliveries pending (not yet delivered nor given up).',
      registers,
      async collect() {
        const { rows } = await sql.query<{ n: string | number }>("SELECT count(*) AS n FROM webhook_events WHERE state = 'pending'");
        this.set(Number(rows[0]?.n ?? 0));
      },
    });
    new Gauge({
      name: 'svc_job_queue_depth',
      help: 'Work not finished, by queue: batch lines not done, video jobs still due.',
      labelNames: ['queue'] as const,
      registers,
      async collect() {
        const { rows } = await sql.query<{ batch: string | number; video: string | number }>(
          "SELECT (SELECT count(*) FROM batch_lines WHERE status <> 'done') AS batch, (SELECT count(*) FROM jobs WHERE kind = 'video') AS video",
        );
        this.set({ queue: 'batch_lines' }, Number(rows[0]?.batch ?? 0));
        this.set({ queue: 'videos' }, Number(rows[0]?.video ?? 0));
      },
    });
    const { projectionLag } = sources;
    if (projectionLag) {
      // Both gauges are collected in one scrape: they share the reads.
      const sharedLag = oncePerScrape(projectionLag);
      new Gauge({
        name: 'svc_projection_lag_events',
        help: "Events in the log after each projection's checkpoint.",
        labelNames: ['projection'] as const,
        registers,
        async collect() {
          this.reset();
          for (const { name, lag } of await sharedLag()) this.set({ projection: name }, lag);
        },
      });
      new Gauge({
        name: 'svc_projection_lag_seconds',
        help: 'Age of the first event each projection has not applied yet (0 when it is at the end of the log), as /health/ready measures it.',
        labelNames: ['projection'] as const,
        registers,
        async collect() {
          this.reset();
          for (const { name, seconds } of await sharedLag()) if (seconds !== null) this.set({ projection: name }, seconds);
        },
      });
    }
    collectDefaultMetrics({ register: this.registry, prefix: 'svc_' });
  }

  /** One finished HTTP request. */
  recordRequest(route: string, method: string, status: number, model: string, seconds: number): void {
    this.httpRequests.inc({ route, method, status: String(status), model });
    this.httpDuration.observe({ route, method }, seconds);
  }

  /** The pipeline's reports by generation, for the request log's lines. */
  readonly requests = new GenerationNotes();

  /** What the metering pipeline reports (libs/metering's MeteringObserver): counted, and noted on the request's record. */
  readonly metering = {
    upstreamAnswered: (generationId: string, provider: string, operation: string, seconds: number): void => {
      this.upstreamDuration.observe({ provider, operation }, seconds);
      this.requests.upstreamAnswered(generationId, provider, seconds);
    },
    upstreamFailed: (generationId: string, provider: string, operation: string, seconds: number, error: unknown): void => {
      this.upstreamDuration.observe({ provider, operation }, seconds);
      this.upstreamErrors.inc({ provider, code: upstreamErrorCode(error) });
      this.requests.upstreamFailed(generationId, provider, seconds);
    },
    // Counted where charges are appended (observed), whatever decided them: only the generation's note here.
    charged: (generationId: string, amountNano: bigint): void => {
      this.requests.charged(generationId, amountNano);
    },
  };

  refused(code: string): void {
    this.rateLimitRefusals.inc({ code });
  }

  /**
   * `store` with every append timed, and every charge it records counted: one decorator where
   * the runtime builds the store, not one per adapter. Charges are counted as UsageCharged
   * events appended, so every path that charges (the metering pipeline, a video job, the hold
   * reaper after a crash) counts once, in the process that recorded it. An own `append` over the
   * adapter's method, so every other member stays the store's own at no cost (a Proxy would be
   * in the way of every read on the hot path).
   */
  observed<S extends EventStore>(store: S): S {
    const { eventStoreAppend: histogram, charges, chargedNano, requests, lostRaces, lockedAppends } = this;
    const count = (events: readonly NewEvent[]) => {
      for (const event of events) {
        if (event.type === 'HoldPlaced') {
          const { hold_id: hold, model } = event.data as { hold_id?: unknown; model?: unknown };
          // A hold's id is its generation's: the model its request is labelled with.
          if (typeof hold === 'string' && typeof model === 'string') requests.held(hold, model);
          continue;
        }
        if (event.type !== 'UsageCharged') continue;
        charges.inc();
        const amount = Number((event.data as { amount_nano?: unknown }).amount_nano);
        if (amount > 0) chargedNano.inc(amount);
      }
    };
    const append = store.append.bind(store);
    store.append = (async (...args: Parameters<EventStore['append']>) => {
      const end = histogram.startTimer();
      try {
        const appended = await append(...args);
        count(args[1]);
        return appended;
      } catch (err) {
        if (err instanceof WrongExpectedVersionError) lostRaces.inc();
        throw err;
      } finally {
        end();
      }
    }) as S['append'];
    // The turn a writer takes under the stream's lock after a lost race (issue 41 A) appends too.
    const exclusive = store.appendExclusive?.bind(store);
    if (exclusive) {
      store.appendExclusive = (async (stream: string, after: bigint, decide: (newer: RecordedEvent[]) => NewEvent[]) => {
        const end = histogram.startTimer();
        lockedAppends.inc();
        let decided: NewEvent[] = [];
        try {
          const done = await exclusive(stream, after, (newer) => (decided = decide(newer)));
          count(decided);
          return done;
        } finally {
          end();
        }
      }) as S['appendExclusive'];
    }
    return store;
  }

  /** The text exposition format. */
  async exposition(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}

/**
 * `read` shared by the gauges of one scrape: prom-client collects them one after another within
 * it, so the first starts the read and the others await the same; the next scrape reads anew.
 */
function oncePerScrape<T>(read: () => Promise<T>): () => Promise<T> {
  let pending: Promise<T> | null = null;
  return () => (pending ??= read().finally(() => setImmediate(() => (pending = null))));
}

/**
 * The route label of a request: the route template as the spec writes it (`/v1/keys/{id}`),
 * from Fastify's (`/v1/keys/:id`); `unmatched` when no route matched (a 404, or a request
 * refused before routing), so a raw URL never becomes a label.
 */
export function routeLabel(template: string | undefined): string {
  if (template === undefined || template === '') return 'unmatched';
  return template.replace(/:([A-Za-z_][A-Za-z0-9_]*)(\([^)]*\))?/g, '{$1}');
}

/** The upstream error code label of a failed provider call: bounded whatever the error. */
export function upstreamErrorCode(err: unknown): string {
  const e = err as { name?: unknown; kind?: unknown; status?: unknown };
  if (e && e.name === 'ProviderError') {
    if (e.kind === 'http' && typeof e.status === 'number' && Number.isInteger(e.status) && e.status >= 100 && e.status <= 599) return `upstream_${e.status}`;
    if (e.kind === 'timeout' || e.kind === 'network' || e.kind === 'invalid_response') return e.kind;
  }
  return 'error';
}
