import { Inject, Injectable, Logger } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import stringify from 'safe-stable-stringify';
import { PromptLogs } from '@svc/conversations';
import { findPreset, presetReference } from '@svc/presets';
import type { Caller } from '@svc/identity';
import { Metering, newGenerationId, type RequestTags } from '@svc/metering';
import {
  ApiError,
  type CachedResponse,
  CLOCK,
  type Clock,
  CONFIG,
  type Config,
  EDGE_STORES,
  type EdgeStores,
  EdgeStoreUnavailable,
  READ_DB,
  SealedIdempotencyStore,
  type SqlRunner,
  type StoredResponse,
} from '@svc/platform';
import { endAfter, sendEventStream } from '../http/streams';
import { clientRequestIdOf } from '../http/reply-headers';
import { deferredAdmissionOf } from '../http/auth.guard';
import { DEFAULT_CACHE_TTL_SECONDS, readEdgeHeaders } from './edge-headers';

/** What an endpoint answered, before it is sent: a JSON body, or an SSE text stream. */
export interface Answer {
  /** The generation of a billed answer; a cacheable request's answer must have one (its cache hits are renamed from it). */
  generationId?: string;
  /** Of a JSON answer; 200 when left out (201 for a created resource). */
  status?: number;
  /** Response headers of the answer itself (content type, generation id, notices...). */
  headers: Record<string, string>;
  json?: unknown;
  /** Bytes that are not JSON (spec 4.9: audio), sent with the content type in `headers`. */
  binary?: Buffer;
  stream?: {
    body: Readable;
    /** Resolves true once the stream finished cleanly and was billed; false for one cut short. */
    finished: Promise<boolean>;
  };
}

export interface EdgeRequest {
  caller: Caller;
  /** The endpoint, part of what makes two requests the same. */
  route: string;
  body: unknown;
  headers: Record<string, string | string[] | undefined>;
  /** Spec 4.2: chat, messages, responses and completions only. */
  cacheable: boolean;
  /**
   * The answer holds a secret (a new key's, shown once): kept for replay only sealed with
   * SVC_ENCRYPTION_KEY, and without that key Idempotency-Key is refused rather than kept in clear.
   */
  sealed?: boolean;
}

/** An idempotency claim outlives a request that never finishes (crash) by this much. */
const CLAIM_GRACE_MS = 60_000;

/**
 * ARCHITECTURE section 5, steps 5 and 6, around a billed endpoint: Idempotency-Key (spec 3.3,
 * 8) and the response cache (spec 4.2 "Response caching"). Both key on the request as it was
 * sent, canonically (key order does not matter), per API key; both keep only answers that
 * finished: an error, or a stream cut short, is never replayed.
 */
@Injectable()
export class EdgeResponses {
  private readonly logger = new Logger('edge');
  /** Built on first use: the encryption key is fixed for the process's life. */
  private sealedStore: SealedIdempotencyStore | null = null;
  private readonly promptLogs: PromptLogs;

  constructor(
    @Inject(READ_DB) sql: SqlRunner,
    @Inject(CONFIG) private readonly config: Pick<Config, 'encryptionKey' | 'upstreamTimeoutMs'>,
    @Inject(EDGE_STORES) private readonly edge: EdgeStores,
    @Inject(CLOCK) private readonly clock: Clock,
    private readonly metering: Metering,
  ) {
    this.promptLogs = new PromptLogs(sql, () => config.encryptionKey);
  }

  /**
   * Sends what `produce` answers (it gets the request's X-Client-Request-Id, spec 4, which is
   * echoed back here, and its Idempotency-Key for the hold), or a replay of an earlier answer.
   */
  async serve(request: EdgeRequest, reply: FastifyReply, produce: (tags: RequestTags) => Promise<Answer>): Promise<void> {
    const clientRequestId = clientRequestIdOf(request.headers);
    if (clientRequestId) void reply.header('x-client-request-id', clientRequestId);
    const { idempotencyKey, cache: asked, cacheRefused } = readEdgeHeaders(request.headers, request.cacheable);
    // Spec 2.5: a preset's version is part of what the request is, and its `cache` turns the cache on.
    const reference = presetReference(request.body);
    const preset = reference ? findPreset(reference, request.caller.presets) : null;
    const cache =
      asked ??
      (request.cacheable && !cacheRefused && preset?.config.cache?.enabled
        ? { ttlSeconds: preset.config.cache.ttl_seconds ?? DEFAULT_CACHE_TTL_SECONDS, clear: false }
        : null);
    // Most requests use neither: a large prompt is then not serialised and hashed for nothing.
    const fingerprint =
      idempotencyKey === null && cache === null
        ? ''
        : sha256(`${request.route}\n${preset ? `${reference!.slug}@${preset.version}\n` : ''}${stringify(request.body)}`);
    const idempotency = idempotencyKey !== null && request.sealed === true ? this.sealedIdempotency() : this.edge.idempotency;
    const scope = request.caller.keyId;
    // Spec 8: a request whose admission waits for its prompt's count is admitted before it claims
    // a key or reads the cache: a refused request must leave neither.
    const admission = deferredAdmissionOf(reply.request);
    if (admission && (idempotencyKey !== null || cache !== null)) await admission.settle();

    if (idempotencyKey !== null) {
      const begun = await idempotency.begin(scope, idempotencyKey, fingerprint, this.config.upstreamTimeoutMs + CLAIM_GRACE_MS).catch(idempotencyDown);
      if (begun.state === 'in_progress') throw inProgress();
      if (begun.state === 'mismatch') throw keyReused();
      if (begun.state === 'replay') return send(reply, begun.response, { 'idempotent-replayed': 'true' });
    }
    // From here on this request holds the claim: whatever happens, it is completed or given back.
    const keep = async (stored: StoredResponse) => {
      if (idempotencyKey !== null) await idempotency.complete(scope, idempotencyKey, fingerprint, stored);
    };
    const giveBack = async () => {
      if (idempotencyKey !== null) await idempotency.abandon(scope, idempotencyKey).catch((err: unknown) => this.warn('idempotency claim not given back', err));
    };

    try {
      const cacheKey = cache === null ? null : sha256(`${scope}\n${fingerprint}`);
      let cacheHeaders: Record<string, string> = {};
      if (cache !== null && cacheKey !== null) {
        if (cache.clear) await this.edge.cache.delete(cacheKey);
        const found = cache.clear ? ({ state: 'miss' } as const) : await this.edge.cache.lookup(cacheKey);
        if (found.state === 'hit') {
          const hit = asHit(found.entry, this.clock.now().getTime());
          // Issue 15.2: the id the hit is answered under is a generation of its own (cost 0, naming its source).
          await this.metering.calls.recordFree(request.caller, {
            id: hit.sourceId,
            endpoint: request.route,
            sourceId: found.entry.response.sourceId,
            clientRequestId,
          });
          await keep(hit);
          return send(reply, hit);
        }
        cacheHeaders = { 'x-svc-cache-status': found.state === 'bypassed' ? 'BYPASS' : 'MISS', 'x-svc-cache-ttl': String(cache.ttlSeconds) };
      }

      // The account decides the key with the hold too (issue 41 B): this store is the fast path,
      // and a claim it lost (a Redis restart) cannot make a charged request run again.
      const idempotency =
        idempotencyKey === null ? undefined : { key: sha256(`${scope}\n${idempotencyKey}`).slice(0, 32), fingerprint: fingerprint.slice(0, 32) };
      const answer = await produce({ clientRequestId, idempotency, ...(admission ? { admission: admission.withPrompt } : {}) });
      // An answer that never reached the prompt's count is counted now, and stands whatever the count says.
      if (admission && !admission.made) await admission.settle().catch(() => undefined);
      const log = this.promptLog(request, answer);
      const headers = { ...answer.headers, ...cacheHeaders };
      const answerId = answer.generationId ?? request.route;
      const store = async (stored: StoredResponse) => {
        if (cache !== null && cacheKey !== null) await this.edge.cache.put(cacheKey, stored, cache.ttlSeconds);
        await keep(stored);
      };

      if (answer.stream === undefined) {
        const stored: StoredResponse =
          answer.binary === undefined
            ? {
                status: answer.status ?? 200,
                headers: { 'content-type': JSON_TYPE, ...headers },
                kind: 'json',
                body: JSON.stringify(answer.json),
                sourceId: answer.generationId ?? '',
              }
            : { status: answer.status ?? 200, headers, kind: 'binary', body: answer.binary.toString('base64'), sourceId: answer.generationId ?? '' };
        // Kept before it is sent, so the client's next request already finds it.
        await store(stored).catch((err: unknown) => this.warn(`${answerId} not kept for replay`, err));
        log?.(answer.binary === undefined ? answer.json : answer.binary);
        return send(reply, stored);
      }

      if (cache === null && idempotencyKey === null && log === null) {
        sendEventStream(reply.headers(headers), answer.stream.body);
        return;
      }
      const { body, finished } = answer.stream;
      let text = '';
      // Kept before the client sees the end, so its next request already finds it.
      const toClient = endAfter(
        body,
        () =>
          finished.then(async (clean) => {
            // What the client was sent, whole or cut short.
            log?.(text);
            if (!clean) return giveBack();
            await store({ status: 200, headers, kind: 'sse', body: text, sourceId: answer.generationId ?? '' }).catch((err: unknown) =>
              this.warn(`${answerId} not kept for replay`, err),
            );
          }),
        (chunk) => (text += chunk.toString()),
      );
      void reply.headers(headers).send(toClient);
    } catch (err) {
      await giveBack();
      throw err;
    }
  }

  private sealedIdempotency(): SealedIdempotencyStore {
    const { encryptionKey } = this.config;
    if (encryptionKey === null) throw sealingUnavailable();
    this.sealedStore ??= new SealedIdempotencyStore(this.edge.idempotency, encryptionKey);
    return this.sealedStore;
  }

  /**
   * Spec 1: with prompt logging on for the caller's account, a function that keeps this
   * exchange once its answer is known; null when it is off (the default), which costs nothing.
   * A log that cannot be written is a warning, never a failed request.
   */
  private promptLog(request: EdgeRequest, answer: Answer): ((response: unknown) => void) | null {
    const days = request.caller.promptLogDays;
    const generationId = answer.generationId;
    if (days === null || days === undefined || !generationId) return null;
    const { caller, route, body } = request;
    const createdAt = this.clock.now();
    return (response) =>
      void this.promptLogs
        .save({ generationId, accountId: caller.accountId, keyId: caller.keyId, endpoint: route, createdAt, request: body, response }, days)
        .catch((err: unknown) => this.warn(`${generationId} not kept in the prompt log`, err));
  }

  private warn(what: string, err: unknown): void {
    this.logger.warn(`${what}: ${err instanceof Error ? err.message : String(err)}`);
  }
}

const JSON_TYPE = 'application/json; charset=utf-8';

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

function send(reply: FastifyReply, stored: StoredResponse, extra: Record<string, string> = {}): void {
  void reply
    .status(stored.status)
    .headers({ ...stored.headers, ...extra })
    .send(stored.kind === 'binary' ? Buffer.from(stored.body, 'base64') : stored.body);
}

/**
 * A cache hit (spec 4.2): the stored answer under an id of its own, with every usage counter
 * (cost included) at 0, since nothing is billed; the source's id is in `x-svc-cache-source-id`.
 */
export function asHit(entry: CachedResponse, nowMs: number): StoredResponse {
  const { response } = entry;
  const id = newGenerationId();
  // The source id is random hex: replacing it everywhere cannot touch anything else.
  // Audio (spec 4.9) is replayed byte for byte; its id and cost are in headers only.
  const renamed = response.kind === 'binary' ? response.body : response.body.split(response.sourceId).join(id);
  const body =
    response.kind === 'json'
      ? JSON.stringify(zeroUsage(JSON.parse(renamed)))
      : response.kind === 'sse'
        ? renamed.split('\n').map(zeroUsageInSseLine).join('\n')
        : renamed;
  return {
    ...response,
    body,
    sourceId: id,
    headers: {
      ...response.headers,
      'x-svc-generation-id': id,
      // A binary answer's cost travels in this header (spec 1 rule 2); a hit costs nothing.
      ...('x-svc-cost' in response.headers ? { 'x-svc-cost': '0' } : {}),
      'x-svc-cache-status': 'HIT',
      'x-svc-cache-age': String(Math.max(0, Math.floor((nowMs - entry.storedAt) / 1000))),
      'x-svc-cache-ttl': String(entry.ttlSeconds),
      'x-svc-cache-source-id': response.sourceId,
    },
  };
}

function zeroUsageInSseLine(line: string): string {
  if (!line.startsWith('data: ')) return line;
  try {
    return `data: ${JSON.stringify(zeroUsage(JSON.parse(line.slice(6))))}`;
  } catch {
    return line; // `[DONE]`
  }
}

/** Every number under a `usage` member, at any depth, set to 0: the shapes of every interface at once. */
export function zeroUsage(value: unknown, inUsage = false): unknown {
  if (typeof value === 'number') return inUsage ? 0 : value;
  if (Array.isArray(value)) return value.map((v) => zeroUsage(v, inUsage));
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, zeroUsage(v, inUsage || k === 'usage')]));
}

function idempotencyDown(err: unknown): never {
  if (err instanceof EdgeStoreUnavailable) {
    // Fail closed: accepting the request without the claim could bill a retry twice.
    throw new ApiError(
      503,
      'service_unavailable',
      'Idempotency-Key cannot be honoured right now (its store is unreachable); retry shortly, or send the request without the header.',
      'idempotency_unavailable',
      null,
      { 'retry-after': '1' },
    );
  }
  throw err;
}

/**
 * A production gateway started without SVC_ENCRYPTION_KEY cannot keep an answer holding a secret
 * except in clear: the header is refused (503, the configuration is at fault, not the request)
 * and the same request without it still works.
 */
function sealingUnavailable(): ApiError {
  return new ApiError(
    503,
    'service_unavailable',
    'Idempotency-Key cannot be honoured on this request by this gateway: it has no SVC_ENCRYPTION_KEY to keep the response encrypted. Send the request without the header, or have the operator set SVC_ENCRYPTION_KEY.',
    'idempotency_unavailable',
  );
}

function inProgress(): ApiError {
  return new ApiError(
    409,
    'idempotency_conflict',
    'A request with this Idempotency-Key is still running; retry once it has finished to get its response.',
    'idempotency_conflict',
    'Idempotency-Key',
  );
}

/** The IETF Idempotency-Key draft's answer (as payment APIs give) to one key reused for another request. */
function keyReused(): ApiError {
  return new ApiError(
    422,
    'invalid_request_error',
    'This Idempotency-Key was used with a different request (endpoint or body); use a new key for a new request.',
    'idempotency_key_reused',
    'Idempotency-Key',
  );
}
