import { STATUS_CODES, type IncomingMessage, type Server } from 'node:http';
import { EventEmitter } from 'node:events';
import type { Duplex } from 'node:stream';
import { Inject, Injectable, Logger, type BeforeApplicationShutdown } from '@nestjs/common';
import type { FastifyBaseLogger, FastifyReply } from 'fastify';
import {
  authenticate,
  authorize,
  hashKeySecret,
  ipAllowed,
  keyFromHeaders,
  secretRefusal,
  type Caller,
  type SecretMatch,
  findKeyBySecretHash,
  type AuthCache,
} from '@svc/identity';
import { CATALOG, type Catalog } from '@svc/catalog';
import { SERVICE_METRICS, type ServiceMetrics } from '@svc/metrics';
import { Metering, type RoutedModel, type Target } from '@svc/metering';
import { operationOf } from '@svc/providers';
import { ApiError, CLOCK, type Clock, CONFIG, type Config, READ_DB, type SqlRunner } from '@svc/platform';
import { WebSocket, WebSocketServer } from 'ws';
import { AUTH_CACHE } from '@svc/runtime';
import { RateLimitService } from '../edge/rate-limits';
import { toApiError } from '../http/error-mapping';
import type { RequestLine } from '../http/request-log';
import { MAX_APPEND_BASE64_CHARS, REALTIME_ENDPOINT, SESSION_MAX_MS } from '@svc/realtime';
import { RealtimeSession } from './realtime-session';

/** WIRE-FORMATS 3.1: the subprotocol selected when offered. */
const REALTIME_SUBPROTOCOL = 'realtime';
/** Spec 5 rule 7: a browser's key, as a subprotocol; never echoed back. */
const BROWSER_KEY_PREFIX = 'svc-insecure-api-key.';
/**
 * The largest frame accepted: an append of the protocol's 15 MiB of base64 with room for its
 * JSON, so one just over the limit is answered with an error event; beyond this ws closes 1009.
 */
const MAX_FRAME_BYTES = MAX_APPEND_BASE64_CHARS + 1024 * 1024;
/** How long the upstream may take to accept the session before the client is told 504. */
const UPSTREAM_CONNECT_MS = 15_000;

/** One handshake, as its log line and metrics tell it. */
interface Handshake {
  started: number;
  /** Once its key is known. */
  caller?: Caller;
}

/** The request log's logger (Fastify's), as the handshake writes to it. */
export type HandshakeLog = Pick<FastifyBaseLogger, 'info' | 'error'>;

/**
 * Stands in for the Fastify reply RateLimitService writes to: it collects the rate-limit headers
 * (sent with the refusal, or the 101) and its `raw` emits 'close' when the session ends, which
 * gives the concurrency slot back. The session holds that one slot for its whole life.
 */
class HandshakeReply {
  readonly raw = new EventEmitter();
  readonly collected: Record<string, string> = {};
  headers(values: Record<string, string>): this {
    Object.assign(this.collected, values);
    return this;
  }
  asReply(): FastifyReply {
    return this as unknown as FastifyReply;
  }
}

/**
 * `GET /v1/realtime?model=<id>` (spec 4.16): the WebSocket upgrade. Everything a billed HTTP call
 * checks is checked on the handshake, and a refusal is a plain HTTP answer with the spec's error
 * object, never an upgrade (WIRE-FORMATS 3.1 practice): the key (spec 5 rules 1, 5, 7), its
 * restrictions and scope (rules 4, 6), the model (spec 7: 404 unknown, 400 not a realtime
 * model), the rate limits (spec 8; the session then holds one concurrency slot), and the
 * upstream's acceptance (502/504). The rules themselves are identity's and the edge's, as
 * ApiKeyGuard applies them.
 */
@Injectable()
export class RealtimeUpgrade implements BeforeApplicationShutdown {
  private readonly logger = new Logger('realtime');
  private readonly sessions = new Set<RealtimeSession>();
  private readonly lookup: (hash: string) => Promise<SecretMatch | null>;
  private readonly upgradeHeaders = new WeakMap<IncomingMessage, Record<string, string>>();
  private handshakeCount = 0;
  private readonly wss = new WebSocketServer({
    noServer: true,
    maxPayload: MAX_FRAME_BYTES,
    handleProtocols: (protocols) => (protocols.has(REALTIME_SUBPROTOCOL) ? REALTIME_SUBPROTOCOL : false),
  });

  constructor(
    @Inject(AUTH_CACHE) private readonly authCache: AuthCache | null,
    @Inject(READ_DB) sql: SqlRunner,
    @Inject(CATALOG) private readonly catalog: Catalog,
    @Inject(SERVICE_METRICS) private readonly metrics: ServiceMetrics,
    @Inject(CONFIG) private readonly config: Config,
    @Inject(CLOCK) private readonly clock: Clock,
    private readonly metering: Metering,
    private readonly rateLimits: RateLimitService,
  ) {
    this.lookup = authCache ? (hash) => authCache.find(hash) : (hash) => findKeyBySecretHash(sql, hash);
    this.wss.on('headers', (headers, req) => {
      for (const [name, value] of Object.entries(this.upgradeHeaders.get(req) ?? {})) headers.push(`${name}: ${value}`);
    });
  }

  /**
   * Takes the upgrades of the gateway's HTTP(S) server. Fastify never sees them, so each
   * handshake is counted in the request metrics and written to `log` (the request log; null
   * when it is off) here, as Fastify's hooks do for every other request (issue 22).
   */
  attach(server: Server, log: HandshakeLog | null): void {
    server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
      // A client that goes away mid-handshake must not crash the gateway.
      socket.on('error', () => undefined);
      const handshake: Handshake = { started: performance.now() };
      const ended = (status: number) => this.handshakeEnded(req, handshake, status, log);
      this.upgrade(req, socket, head, handshake, ended).catch((err: unknown) => {
        this.logger.error(`realtime upgrade failed: ${(err as Error)?.stack ?? String(err)}`);
        refuse(socket, ApiError.internal(), {});
        ended(500);
      });
    });
  }

  private handshakeEnded(req: IncomingMessage, handshake: Handshake, status: number, log: HandshakeLog | null): void {
    const url = new URL(req.url ?? '/', 'http://gateway');
    const path = url.pathname.slice(0, 200);
    const route = path === REALTIME_ENDPOINT ? REALTIME_ENDPOINT : 'unmatched';
    const requested = url.searchParams.get('model');
    const model = requested !== null && this.catalog.get(requested) !== undefined ? requested : '';
    const seconds = (performance.now() - handshake.started) / 1000;
    this.metrics.recordRequest(route, 'GET', status, model, seconds);
    if (!log) return;
    const { caller } = handshake;
    const line: RequestLine = {
      method: 'GET',
      route,
      path,
      status,
      latency_ms: Math.round(seconds * 10_000) / 10,
      ...(caller ? { key_id: caller.keyId, account_id: caller.accountId } : {}),
      ...(model ? { model } : {}),
    };
    // An id of its own kind beside Fastify's req-N: the log's lines can be told apart.
    const entry = { reqId: `ws-${(++this.handshakeCount).toString(36)}`, ...line };
    if (status >= 500) log.error(entry, `GET ${path} ${status}`);
    else log.info(entry, `GET ${path} ${status}`);
  }

  async beforeApplicationShutdown(): Promise<void> {
    await Promise.all([...this.sessions].map((s) => s.shutdown()));
    this.wss.close();
  }

  private async upgrade(req: IncomingMessage, socket: Duplex, head: Buffer, handshake: Handshake, ended: (status: number) => void): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://gateway');
    const refused = (error: ApiError, headers: Record<string, string>) => {
      refuse(socket, error, headers);
      ended(error.status);
    };
    if (url.pathname !== REALTIME_ENDPOINT) {
      return refused(ApiError.notFound(`No WebSocket endpoint at ${url.pathname}; the realtime endpoint is ${REALTIME_ENDPOINT}?model=<id>.`, 'not_found'), {});
    }
    const reply = new HandshakeReply();
    let admitted: { caller: Caller; routed: RoutedModel; upstream: WebSocket; secretHash: string };
    try {
      admitted = await this.admit(req, url, reply, handshake);
    } catch (err) {
      return refused(toApiError(err, this.clock.now()), reply.collected);
    }
    const { caller, routed, upstream, secretHash } = admitted;
    // Only the secret's hash is kept for the session's re-checks (spec 5.5, issue 41 S1).
    let lastMatch: SecretMatch | null | undefined;
    const cache = this.authCache;
    const session = new RealtimeSession({
      keyRefusal: async (fresh) => {
        if (fresh || lastMatch === undefined) lastMatch = await this.lookup(secretHash);
        return secretRefusal(lastMatch, secretHash, this.clock.now());
      },
      watchKey: (changed) => cache?.onInvalidate(changed) ?? (() => undefined),
      caller,
      metering: this.metering,
      clock: this.clock,
      routed,
      upstream,
      slot: reply.raw,
      warn: (message) => this.logger.warn(message),
      ended: (s) => this.sessions.delete(s),
    });
    this.sessions.add(session);
    this.upgradeHeaders.set(req, reply.collected);
    // A client gone before its upgrade completes: the session ends before it began.
    let started = false;
    const abandoned = () => {
      if (!started) void session.shutdown();
    };
    if (socket.destroyed) return abandoned();
    socket.once('close', abandoned);
    this.wss.handleUpgrade(req, socket, head, (ws) => {
      started = true;
      socket.off('close', abandoned);
      session.start(ws);
      ended(101);
    });
  }

  private async admit(
    req: IncomingMessage,
    url: URL,
    reply: HandshakeReply,
    handshake: Handshake,
  ): Promise<{ caller: Caller; routed: RoutedModel; upstream: WebSocket; secretHash: string }> {
    const ip = clientIp(req, this.config.trustProxy);
    this.rateLimits.refuseIfGuessing(ip);
    const fromHeaders = keyFromHeaders(req.rawHeaders);
    const fromProtocol = browserKey(req);
    if (fromHeaders !== null && fromProtocol !== null && fromHeaders !== fromProtocol) {
      throw ApiError.invalidRequest(
        'The Authorization header and the svc-insecure-api-key subprotocol carry different keys; send one key.',
        'Sec-WebSocket-Protocol',
        'ambiguous_api_key',
      );
    }
    const secret = fromHeaders ?? fromProtocol;
    const caller = await authenticate(secret, this.lookup, this.clock.now()).catch(async (err: unknown) => {
      if (secret !== null && err instanceof ApiError && err.status === 401) await this.rateLimits.failedAuthentication(ip);
      throw err;
    });
    handshake.caller = caller;
    const header = (name: string) => (typeof req.headers[name] === 'string' ? (req.headers[name] as string) : undefined);
    try {
      // Spec 5 rule 7: a key in the subprotocol is one a web page shows; only a key restricted to
      // the page's domains may travel that way (authorize then checks the Origin against them).
      if (fromHeaders === null && fromProtocol !== null && !(caller.allowed_referrers && caller.allowed_referrers.length > 0)) {
        throw ApiError.permission(
          'A key sent as the svc-insecure-api-key subprotocol must be restricted to your domains (allowed_referrers); use a domain-restricted key, or send the key in the Authorization header from a server.',
          'browser_key_not_restricted',
        );
      }
      authorize(caller, 'model_call', { ip, origin: header('origin'), referer: header('referer') });
    } catch (err) {
      await this.rateLimits.reportWindows(caller, reply.asReply()).catch(() => undefined);
      throw err;
    }
    const model = url.searchParams.get('model');
    if (!model) throw ApiError.invalidRequest('The model query parameter is required: /v1/realtime?model=<id>.', 'model', 'missing_required_parameter');
    const { models } = this.metering.route(caller, 'realtime', { model });
    // The session dials one provider for its whole life: the model's first route.
    const routed: RoutedModel = { ...models[0], routes: models[0].routes.slice(0, 1) };
    const target = await this.targetOf(caller, routed);
    const connection = operationOf(target.provider, 'realtime')?.(target.route.upstreamModel);
    if (!connection) throw ApiError.invalidRequest(`The model '${model}' is not served over realtime by its provider.`, 'model', 'unsupported_model');
    // One concurrency slot for the session's whole life (spec 8: up to 60 minutes), not an upstream call's.
    await this.rateLimits.admit(caller, 'model_call', reply.asReply(), { slotMs: SESSION_MAX_MS });
    try {
      return { caller, routed, upstream: await dial(connection.url, connection.headers), secretHash: hashKeySecret(secret!) };
    } catch (err) {
      reply.raw.emit('close');
      throw err;
    }
  }

  /** The live target of the route (the account's own key where it has one, BYOK), with no hold and no record. */
  private async targetOf(caller: Caller, routed: RoutedModel): Promise<Target> {
    const tried = await this.metering.calls.tryTargets(`realtime:${caller.keyId}`, caller, [routed], async (target) => target);
    if (!tried.answered) throw tried.error;
    return tried.value;
  }
}

/** The key of the browser subprotocol (spec 5 rule 7), or null. */
function browserKey(req: IncomingMessage): string | null {
  const offered = (req.headers['sec-websocket-protocol'] ?? '').split(',').map((p) => p.trim());
  const found = offered.find((p) => p.startsWith(BROWSER_KEY_PREFIX) && p.length > BROWSER_KEY_PREFIX.length);
  return found ? found.slice(BROWSER_KEY_PREFIX.length) : null;
}

/**
 * The client's address as Fastify's `request.ip` gives it with SVC_TRUST_PROXY: the socket's
 * peer, then X-Forwarded-For from the right while the hop before is a trusted proxy.
 */
function clientIp(req: IncomingMessage, trusted: readonly string[]): string {
  let ip = req.socket.remoteAddress ?? '';
  if (trusted.length === 0) return ip;
  const forwarded = String(req.headers['x-forwarded-for'] ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .reverse();
  for (const hop of forwarded) {
    if (!ipAllowed(ip, trusted)) return ip;
    ip = hop;
  }
  return ip;
}

/** Opens the upstream session; a refusal or a timeout is the client's 502 or 504. */
function dial(url: string, headers: Record<string, string>): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, [REALTIME_SUBPROTOCOL], { headers, handshakeTimeout: UPSTREAM_CONNECT_MS, maxPayload: MAX_FRAME_BYTES });
    const fail = (status: number, message: string) => {
      ws.removeAllListeners();
      ws.on('error', () => undefined);
      ws.terminate();
      reject(new ApiError(status, 'api_error', message, status === 504 ? 'upstream_timeout' : 'upstream_error'));
    };
    ws.once('open', () => {
      ws.removeAllListeners();
      // The upstream speaks first (session.created): nothing is read until the session listens.
      ws.pause();
      resolve(ws);
    });
    ws.once('unexpected-response', (_req, res) => {
      res.resume();
      fail(502, `The model's provider refused the realtime session (HTTP ${res.statusCode}).`);
    });
    ws.once('error', (err) => fail(/timed out|timeout/i.test(err.message) ? 504 : 502, "The model's provider could not be reached for a realtime session."));
  });
}

/** A plain HTTP answer instead of the upgrade (spec 2.1 error object), then the socket closed. */
function refuse(socket: Duplex, error: ApiError, headers: Record<string, string>): void {
  if (socket.destroyed) return;
  const body = JSON.stringify(error.toBody());
  const head = [
    `HTTP/1.1 ${error.status} ${STATUS_CODES[error.status] ?? ''}`,
    'Connection: close',
    'Content-Type: application/json',
    `Content-Length: ${Buffer.byteLength(body)}`,
    ...Object.entries({ ...headers, ...error.headers }).map(([name, value]) => `${name}: ${value}`),
  ];
  socket.once('finish', () => socket.destroy());
  socket.end(`${head.join('\r\n')}\r\n\r\n${body}`);
}
