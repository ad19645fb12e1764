import { createPrivateKey, X509Certificate, type KeyObject } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { createSecureContext } from 'node:tls';
import ipaddr from 'ipaddr.js';
import { ConfigError, type Env, envReader, type EnvReader } from './config-env';
import { parseEventStoreUrl } from './eventstore-url';
import { DEFAULT_RATE_LIMITS, parseRateLimits, type RateLimitDefaults } from './rate-limits';
import { DEFAULT_POOL_MAX } from './sql';

export { ConfigError } from './config-env';

/**
 * The configuration contract of ARCHITECTURE section 7. Invalid values stop the process at
 * start with a message naming the variable.
 */
export interface Config {
  port: number;
  /** Interface to listen on; 0.0.0.0 in containers. */
  host: string;
  dataDir: string;
  /** PostgreSQL for read models, and for events when eventstoreUrl is unset; null = PGlite in dataDir. */
  databaseUrl: string | null;
  /**
   * A hot standby of databaseUrl (DATABASE_READ_URL) for the pure read-model reads; null = every
   * read on databaseUrl. Reads of one's own writes stay correct: see ReadYourWrites.readFrom.
   */
  databaseReadUrl: string | null;
  /**
   * DATABASE_SESSION_URL: where the connections that must stay sessions (the LISTENs of the event
   * store and of the authentication cache) go when DATABASE_URL is a pooler in transaction mode
   * (PgBouncer); null = DATABASE_URL. Set (and different), it also means DATABASE_URL keeps no
   * session state between transactions, so statements are not prepared under names.
   */
  databaseSessionUrl: string | null;
  /** DATABASE_POOL_MAX: statement connections each process opens to DATABASE_URL at most. */
  databasePoolMax: number;
  eventstoreUrl: string | null;
  /** null = in-memory limiter/cache (single process), unless redisClusterNodes is set. */
  redisUrl: string | null;
  /** REDIS_CLUSTER_NODES: a Redis Cluster instead of one Redis server, by some of its nodes (the client finds the rest). */
  redisClusterNodes: { host: string; port: number }[] | null;
  /** null = generated into the data dir on first start. */
  adminToken: string | null;
  /** null = the built-in catalog. */
  catalogPath: string | null;
  /** 32 bytes; null = generated into the data dir on first start. */
  encryptionKey: Buffer | null;
  /** Base URL of the simulated upstream; null = start one in-process when the catalog needs it. */
  simulatorUrl: string | null;
  /** How long a gateway waits for the upstream before giving up (ms). */
  upstreamTimeoutMs: number;
  /**
   * Issue 41 S3, the HTTP server's timeouts (ms): the request line and headers must arrive within
   * `headersMs`, the whole request (its body too) within `requestMs` (receiving only: a long
   * response is never cut by it), and an idle keep-alive connection is closed after `keepAliveMs`.
   */
  serverTimeouts: { headersMs: number; requestMs: number; keepAliveMs: number };
  /** What a bring-your-own-key request is billed, in percent of its price on the operator's key. */
  byokFeePercent: number;
  /** Lines of one account's batches a worker runs at once (spec 4.11): bounds what one huge batch takes. */
  batchConcurrency: number;
  /** Per-key rate limits of every account (spec 8), for live and for test keys. */
  rateLimits: RateLimitDefaults;
  /**
   * Proxies whose X-Forwarded-For is believed (addresses or CIDR ranges); empty = none, and
   * the client IP is the socket's. Trusting every proxy would let callers forge their IP
   * and walk past a key's IP allowlist.
   */
  trustProxy: string[];
  /**
   * Whether a gateway keeps an authentication cache (SVC_AUTH_CACHE, on by default). Off, every
   * request reads its key from the read model.
   */
  authCache: boolean;
  /**
   * Failed authentications a client address may make per minute (SVC_AUTH_FAILURE_LIMIT);
   * past it, requests from that address are refused with 429 until the minute is over.
   */
  authFailureLimit: number;
  /** One line per request on standard output (SVC_REQUEST_LOG, on by default). */
  requestLog: boolean;
  /** How much the process logs (LOG_LEVEL, `info` by default): request lines are `info`, failures `warn` and `error`. */
  logLevel: LogLevel;
  /**
   * SVC_LOG_FORMAT: `json`, one object per line for a log collector, or `pretty`, for a person at
   * a terminal. Unset: pretty when standard output is a terminal, else JSON.
   */
  logFormat: 'json' | 'pretty' | null;
  /**
   * How long a stopping process waits for its streams to settle before it exits anyway (ms);
   * by default below the 30 s most orchestrators allow between SIGTERM and SIGKILL.
   */
  shutdownGraceMs: number;
  /**
   * How long a client may read nothing of a stream whose buffer in the gateway is full before
   * the stream is cut and billed for what was delivered (SVC_STREAM_STALL_MS, issue 41 F).
   */
  streamStallMs: number;
  /**
   * SVC_METRICS_PORT: `GET /metrics` is served on this port, without a token, and not on `port`;
   * null (unset): on `port`, with the admin token. 0 lets the system choose (tests).
   */
  metricsPort: number | null;
  /**
   * How far (seconds) the slowest projection may be behind the event log before
   * `GET /health/ready` answers 503 (SVC_READY_MAX_LAG_SECONDS, 30 by default).
   */
  readyMaxLagSeconds: number;
  /**
   * For development only (SVC_WEBHOOK_ALLOW_PRIVATE, off by default): lets webhook targets, and
   * every other URL the service fetches on a caller's behalf, use `http` and reach loopback and
   * private addresses, so a receiver on the developer's own machine can be tried. Left on in
   * production, any caller could make the service reach its own internal network.
   */
  webhookAllowPrivate: boolean;
  /**
   * Where outgoing mail is relayed (SVC_SMTP_URL, `smtp://` or `smtps://`, credentials in the
   * URL); null = nothing leaves the machine and each message is written as an .eml file under
   * `<dataDir>/mail/`, so development and tests need no mail server and the codes can still be read.
   */
  smtpUrl: string | null;
  /**
   * The From header of every message (SVC_MAIL_FROM). Relays refuse or spam-folder mail whose
   * sender domain they do not handle, so production sets one the relay is allowed to send for.
   */
  mailFrom: string;
  /**
   * The certificate and private key the gateway serves HTTPS (and WSS) with, on its one port
   * (SVC_TLS_CERT and SVC_TLS_KEY, PEM file paths, both or neither); null = plain HTTP.
   */
  tls: TlsFiles | null;
  /**
   * The built console (SVC_CONSOLE_DIR; by default the build `npm run build` makes), served at
   * /console/; null = not served (`off`, or no build beside the code).
   */
  consoleDir: string | null;
  /**
   * Issue 22: OpenTelemetry spans exported over OTLP/HTTP to `url` (OTEL_EXPORTER_OTLP_ENDPOINT
   * plus `/v1/traces`, or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as it is) as `serviceName`
   * (OTEL_SERVICE_NAME); null (no endpoint, or OTEL_SDK_DISABLED=true): no tracing at all.
   */
  tracing: { url: string; serviceName: string } | null;
  /**
   * Issue 45: gateways hand an account several of them are racing on to one of them
   * (SVC_PEER_FORWARDING, off by default). `url` is where the others reach this one
   * (SVC_PEER_URL); null = `http://HOST:<the port it listens on>`, which needs a HOST other
   * gateways can reach (not a wildcard). `handOver` is what travels: only the account's holds
   * and charges (`ledger`, SVC_PEER_FORWARDING=on or ledger), while the gateway that received a
   * request serves it, or whole requests (`requests`). `on` is the hand-over that served the
   * spread load faster, streamed and not (docs/SCALING.md).
   */
  peerForwarding: { url: string | null; handOver: 'requests' | 'ledger' } | null;
}

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** The PEM contents of SVC_TLS_CERT (the leaf first, then any intermediates) and SVC_TLS_KEY. */
export interface TlsFiles {
  cert: Buffer;
  key: Buffer;
}

function addressList(variable: string, value: string | null): string[] {
  if (value === null) return [];
  const entries = value
    .split(',')
    .map((e) => e.trim())
    .filter(Boolean);
  for (const entry of entries) {
    if (!ipaddr.isValid(entry) && !ipaddr.isValidCIDR(entry)) {
      throw new ConfigError(variable, `expected IP addresses or CIDR ranges separated by commas, got ${JSON.stringify(entry)}`);
    }
  }
  return entries;
}

/**
 * A From header is read once and used on every message; a malformed one would only show up as
 * every send failing, and a line break would let the setting smuggle in headers of its own.
 */
function mailbox(variable: string, value: string | null, fallback: string): string {
  if (value === null) return fallback;
  if (!/^(?:[^\s<>@",;:]+@[^\s<>@",;:]+|[^<>\r\n]*<[^\s<>@",;:]+@[^\s<>@",;:]+>)$/.test(value)) {
    throw new ConfigError(variable, `expected an address, or a name and <address>, got ${JSON.stringify(value)}`);
  }
  return value;
}

/**
 * The files are read here, when the configuration is, not when the app is created: a missing
 * file, a key that is not the certificate's, or only one of the two set then stops the process
 * the way every other bad setting does (`Invalid configuration: SVC_TLS_KEY: ...`, exit 1),
 * before any database is opened or port bound, and the checks can be tested without a server.
 * They are read once: a renewed certificate takes effect at the next start.
 * Any process given them (a worker or the CLI sharing the gateway's environment) reads them too.
 * No message repeats what a file holds (the key is a secret), only its path and what is wrong.
 */
function tlsFiles(certPath: string | null, keyPath: string | null): TlsFiles | null {
  if (certPath === null && keyPath === null) return null;
  const both = 'HTTPS needs both SVC_TLS_CERT and SVC_TLS_KEY (PEM file paths); plain HTTP neither';
  if (keyPath === null) throw new ConfigError('SVC_TLS_KEY', `not set, but SVC_TLS_CERT is: ${both}`);
  if (certPath === null) throw new ConfigError('SVC_TLS_CERT', `not set, but SVC_TLS_KEY is: ${both}`);
  const read = (variable: string, path: string): Buffer => {
    try {
      return readFileSync(path);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      throw new ConfigError(variable, `cannot read ${JSON.stringify(path)}${code ? ` (${code})` : ''}`);
    }
  };
  const cert = read('SVC_TLS_CERT', certPath);
  const key = read('SVC_TLS_KEY', keyPath);
  let leaf: X509Certificate;
  try {
    leaf = new X509Certificate(cert);
  } catch {
    throw new ConfigError('SVC_TLS_CERT', `${JSON.stringify(certPath)} holds no PEM certificate (-----BEGIN CERTIFICATE-----)`);
  }
  let privateKey: KeyObject;
  try {
    privateKey = createPrivateKey(key);
  } catch {
    throw new ConfigError('SVC_TLS_KEY', `${JSON.stringify(keyPath)} holds no unencrypted PEM private key (-----BEGIN PRIVATE KEY-----)`);
  }
  if (!leaf.checkPrivateKey(privateKey)) {
    throw new ConfigError('SVC_TLS_KEY', `the key in ${JSON.stringify(keyPath)} does not match the certificate in ${JSON.stringify(certPath)} (SVC_TLS_CERT)`);
  }
  // What the server will do with them: OpenSSL may still refuse the pair (a key too weak for its
  // security level). Its reason names the problem, never the key's bytes.
  try {
    createSecureContext({ cert, key });
  } catch (err) {
    const reason = (err as { reason?: unknown }).reason;
    throw new ConfigError('SVC_TLS_CERT', `TLS refuses this certificate and key${typeof reason === 'string' ? `: ${reason}` : ''}`);
  }
  return { cert, key };
}

/**
 * Each area reads its variables in the order of Config's fields, so that of several bad settings
 * the first in that order is the one reported (the catalog file and the secrets before all).
 */
export function loadConfig(env: Env = process.env): Config {
  const read = envReader(env);
  const secrets = fileAndSecrets(read);
  return {
    port: read.integer('PORT', 8080, 0, 65535),
    host: read.text('HOST') ?? 'localhost',
    ...stores(read),
    adminToken: secrets.adminToken,
    catalogPath: secrets.catalogPath === null ? null : resolve(secrets.catalogPath),
    encryptionKey: secrets.encryptionKey,
    ...upstreamAndServer(read),
    ...requestLimits(read),
    ...logging(read),
    ...lifecycle(read),
    ...outbound(read),
    tls: tlsFiles(read.text('SVC_TLS_CERT'), read.text('SVC_TLS_KEY')),
    consoleDir: consoleDir(read.text('SVC_CONSOLE_DIR')),
    tracing: tracing(read),
    peerForwarding: peerForwarding(read),
  };
}

function peerForwarding({ text, url, oneOf }: EnvReader): Config['peerForwarding'] {
  const peerUrl = url('SVC_PEER_URL', ['http:', 'https:']);
  const given = oneOf('SVC_PEER_FORWARDING', ['off', 'on', 'requests', 'ledger'] as const) ?? 'off';
  if (given === 'off') {
    if (peerUrl !== null) throw new ConfigError('SVC_PEER_URL', 'set, but SVC_PEER_FORWARDING is not on: it is the address peers forward to');
    return null;
  }
  const host = text('HOST') ?? 'localhost';
  // A wildcard says where this gateway listens, not where the others can reach it.
  if (peerUrl === null && (host === '0.0.0.0' || host === '::')) {
    throw new ConfigError('SVC_PEER_URL', `needed with SVC_PEER_FORWARDING=on and HOST=${host}: the URL other gateways reach this one at`);
  }
  return { url: peerUrl, handOver: given === 'requests' ? 'requests' : 'ledger' };
}

/** Checked before any other setting, so a missing catalog or a bad key is what a start reports first. */
function fileAndSecrets(read: EnvReader): Pick<Config, 'catalogPath' | 'encryptionKey' | 'adminToken'> {
  const catalogPath = read.text('SVC_CATALOG');
  if (catalogPath !== null && !existsSync(catalogPath)) {
    throw new ConfigError('SVC_CATALOG', `no such file: ${catalogPath}`);
  }
  const keyText = read.text('SVC_ENCRYPTION_KEY');
  let encryptionKey: Buffer | null = null;
  if (keyText !== null) {
    encryptionKey = Buffer.from(keyText, 'base64');
    if (encryptionKey.length !== 32 || encryptionKey.toString('base64') !== keyText) {
      throw new ConfigError('SVC_ENCRYPTION_KEY', 'expected 32 bytes encoded in base64 (openssl rand -base64 32)');
    }
  }
  const adminToken = read.text('SVC_ADMIN_TOKEN');
  if (adminToken !== null && adminToken.length < 16) {
    throw new ConfigError('SVC_ADMIN_TOKEN', 'must be at least 16 characters');
  }
  return { catalogPath, encryptionKey, adminToken };
}

function stores(
  read: EnvReader,
): Pick<Config, 'dataDir' | 'databaseUrl' | 'databaseReadUrl' | 'databaseSessionUrl' | 'databasePoolMax' | 'eventstoreUrl' | 'redisUrl' | 'redisClusterNodes'> {
  const { text, url } = read;
  const redisUrl = url('REDIS_URL', ['redis:', 'rediss:']);
  const redisClusterNodes = clusterNodes('REDIS_CLUSTER_NODES', text('REDIS_CLUSTER_NODES'));
  if (redisUrl !== null && redisClusterNodes !== null) {
    throw new ConfigError('REDIS_CLUSTER_NODES', 'set either REDIS_URL (one Redis server) or REDIS_CLUSTER_NODES (a Redis Cluster), not both');
  }
  return {
    dataDir: resolve(text('SVC_DATA_DIR') ?? './.svc-data'),
    ...database(read),
    eventstoreUrl: eventstoreUrl(text('EVENTSTORE_URL')),
    redisUrl,
    redisClusterNodes,
  };
}

/**
 * A node or a cluster (several gossip seeds: not a WHATWG URL, hence not `url`), checked as the
 * adapter will read it, so that a bad port or option stops the start and names the variable.
 */
function eventstoreUrl(value: string | null): string | null {
  if (value === null) return null;
  try {
    parseEventStoreUrl(value);
  } catch (err) {
    throw new ConfigError('EVENTSTORE_URL', (err as Error).message);
  }
  return value;
}

function database({ url, integer }: EnvReader): Pick<Config, 'databaseUrl' | 'databaseReadUrl' | 'databaseSessionUrl' | 'databasePoolMax'> {
  const databaseUrl = url('DATABASE_URL', ['postgres:', 'postgresql:']);
  const databaseReadUrl = url('DATABASE_READ_URL', ['postgres:', 'postgresql:']);
  // A standby replays a PostgreSQL primary: the embedded PGlite has none.
  if (databaseReadUrl !== null && databaseUrl === null) throw new ConfigError('DATABASE_READ_URL', 'needs DATABASE_URL: it is a standby of that database');
  const sessionUrl = url('DATABASE_SESSION_URL', ['postgres:', 'postgresql:']);
  // Without DATABASE_URL the database is the embedded one: a session URL alone would be ignored.
  if (sessionUrl !== null && databaseUrl === null)
    throw new ConfigError('DATABASE_SESSION_URL', "set, but DATABASE_URL is not: it is for DATABASE_URL's sessions");
  return {
    databaseUrl,
    databaseReadUrl,
    databaseSessionUrl: sessionUrl === databaseUrl ? null : sessionUrl,
    databasePoolMax: integer('DATABASE_POOL_MAX', DEFAULT_POOL_MAX, 1, 1000),
  };
}

/** `host:port,host:port,...`; an IPv6 address in brackets (`[::1]:7000`). */
function clusterNodes(variable: string, value: string | null): Config['redisClusterNodes'] {
  if (value === null) return null;
  const nodes = value.split(',').map((entry) => {
    const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^\s:[\]/@]+)):(\d{1,5})$/.exec(entry.trim());
    const port = Number(m?.[3]);
    if (!m || port < 1 || port > 65535) {
      throw new ConfigError(variable, `expected host:port pairs separated by commas (127.0.0.1:7000,127.0.0.1:7001), got ${JSON.stringify(entry.trim())}`);
    }
    return { host: m[1] ?? m[2], port };
  });
  return nodes;
}

function upstreamAndServer({
  url,
  integer,
}: EnvReader): Pick<Config, 'simulatorUrl' | 'upstreamTimeoutMs' | 'serverTimeouts' | 'byokFeePercent' | 'batchConcurrency'> {
  const simulatorUrl = url('SVC_SIMULATOR_URL', ['http:', 'https:']);
  const upstreamTimeoutMs = integer('SVC_UPSTREAM_TIMEOUT_MS', 120_000, 1, 3_600_000);
  const headersMs = integer('SVC_HEADERS_TIMEOUT_MS', 10_000, 1_000, 600_000);
  const requestMs = integer('SVC_REQUEST_TIMEOUT_MS', 300_000, 1_000, 3_600_000);
  // Node refuses a header timeout longer than the request's: the headers are part of it.
  if (headersMs > requestMs) throw new ConfigError('SVC_HEADERS_TIMEOUT_MS', `must not exceed SVC_REQUEST_TIMEOUT_MS (${requestMs})`);
  return {
    simulatorUrl,
    upstreamTimeoutMs,
    serverTimeouts: { headersMs, requestMs, keepAliveMs: integer('SVC_KEEP_ALIVE_TIMEOUT_MS', 72_000, 1_000, 600_000) },
    byokFeePercent: integer('SVC_BYOK_FEE_PERCENT', 5, 0, 100),
    batchConcurrency: integer('SVC_BATCH_CONCURRENCY', 8, 1, 256),
  };
}

function requestLimits({ text, integer, onOff }: EnvReader): Pick<Config, 'rateLimits' | 'trustProxy' | 'authCache' | 'authFailureLimit'> {
  const rateLimits = (name: string, environment: 'live' | 'test') => {
    const v = text(name);
    try {
      return v === null ? DEFAULT_RATE_LIMITS[environment] : parseRateLimits(v, DEFAULT_RATE_LIMITS[environment]);
    } catch (err) {
      throw new ConfigError(name, (err as Error).message);
    }
  };
  return {
    rateLimits: { live: rateLimits('SVC_RATE_LIMITS_LIVE', 'live'), test: rateLimits('SVC_RATE_LIMITS_TEST', 'test') },
    trustProxy: addressList('SVC_TRUST_PROXY', text('SVC_TRUST_PROXY')),
    authCache: onOff('SVC_AUTH_CACHE', true),
    authFailureLimit: integer('SVC_AUTH_FAILURE_LIMIT', 100, 1, 1_000_000_000),
  };
}

function logging({ onOff, oneOf }: EnvReader): Pick<Config, 'requestLog' | 'logLevel' | 'logFormat'> {
  return {
    requestLog: onOff('SVC_REQUEST_LOG', true),
    logLevel: oneOf('LOG_LEVEL', LOG_LEVELS) ?? 'info',
    logFormat: oneOf('SVC_LOG_FORMAT', ['json', 'pretty'] as const),
  };
}

function lifecycle({ text, integer }: EnvReader): Pick<Config, 'shutdownGraceMs' | 'streamStallMs' | 'metricsPort' | 'readyMaxLagSeconds'> {
  const metricsPort = (): number | null => {
    if (text('SVC_METRICS_PORT') === null) return null;
    const port = integer('SVC_METRICS_PORT', 0, 0, 65535);
    if (port !== 0 && port === integer('PORT', 8080, 0, 65535)) throw new ConfigError('SVC_METRICS_PORT', `must differ from PORT (${port})`);
    return port;
  };
  return {
    shutdownGraceMs: integer('SVC_SHUTDOWN_GRACE_MS', 25_000, 0, 600_000),
    streamStallMs: integer('SVC_STREAM_STALL_MS', 20_000, 100, 600_000),
    metricsPort: metricsPort(),
    readyMaxLagSeconds: integer('SVC_READY_MAX_LAG_SECONDS', 30, 1, 86_400),
  };
}

function outbound({ text, url, trueFalse }: EnvReader): Pick<Config, 'webhookAllowPrivate' | 'smtpUrl' | 'mailFrom'> {
  // The URL helper checks the scheme; a relay also needs a host, and `smtp:relay` (no //) parses
  // as a URL with none. The value is never echoed: it may carry the relay's password.
  const smtpUrl = (): string | null => {
    const v = url('SVC_SMTP_URL', ['smtp:', 'smtps:']);
    if (v !== null && new URL(v).hostname === '') {
      throw new ConfigError('SVC_SMTP_URL', 'expected smtp://[user:password@]host[:port] (or smtps://), got no host');
    }
    return v;
  };
  return {
    webhookAllowPrivate: trueFalse('SVC_WEBHOOK_ALLOW_PRIVATE', false),
    smtpUrl: smtpUrl(),
    mailFrom: mailbox('SVC_MAIL_FROM', text('SVC_MAIL_FROM'), 'svc-gateway <no-reply@localhost>'),
  };
}

// The OpenTelemetry variables, read as the OTLP exporter specification reads them.
function tracing({ text, url }: EnvReader): Config['tracing'] {
  const traces = url('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', ['http:', 'https:']);
  const base = url('OTEL_EXPORTER_OTLP_ENDPOINT', ['http:', 'https:']);
  if ((traces === null && base === null) || text('OTEL_SDK_DISABLED')?.toLowerCase() === 'true') return null;
  return { url: traces ?? `${base!.replace(/\/+$/, '')}/v1/traces`, serviceName: text('OTEL_SERVICE_NAME') ?? 'svc-gateway' };
}

/**
 * Where the console's build is: the compiled gateway finds it beside itself (dist/console), the
 * TypeScript sources (tests) in dist/ of the checkout. A directory named but without an
 * index.html is a mistake worth stopping for; no build by default just serves no console.
 */
function consoleDir(value: string | null): string | null {
  if (value === 'off') return null;
  if (value !== null) {
    const dir = resolve(value);
    if (!existsSync(join(dir, 'index.html')))
      throw new ConfigError('SVC_CONSOLE_DIR', `expected a directory holding the console's index.html, or off; ${dir} has none`);
    return dir;
  }
  return [resolve(__dirname, '../../../console'), resolve(__dirname, '../../../dist/console')].find((dir) => existsSync(join(dir, 'index.html'))) ?? null;
}
