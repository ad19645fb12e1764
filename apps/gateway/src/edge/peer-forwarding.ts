import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Agent, request as send } from 'undici';
import { authenticate, keyFromHeaders } from '@svc/identity';
import { callerOf } from '../http/auth.guard';
import { ApiError, CallSignal } from '@svc/platform';
import { neverSent, type Runtime } from '@svc/runtime';

/**
 * Set on a request one gateway hands to another: the receiver serves it, whatever it would
 * route, so that two gateways that disagree for a moment about an owner never pass a request
 * back and forth. A client that sends it only has its request served where it landed.
 */
export const FORWARDED_BY = 'x-svc-forwarded-by';

/**
 * On an answer to a forwarded request: `1` when requests of the account also reach the serving
 * gateway from elsewhere (clients, other peers), so the forwarding gateway keeps handing them
 * over; `0` when it is the only one sending them, so it may as well serve them itself.
 */
const SHARED = 'x-svc-peer-shared';

/** The model calls whose holds and charges make an account's stream hot: JSON bodies, one account each. */
const FORWARDED_ROUTES = new Set(['/v1/chat/completions', '/v1/completions', '/v1/messages', '/v1/responses', '/v1/embeddings']);

/** Headers of one connection, not of the request or its answer (RFC 9110 section 7.6.1), and the ones the next hop sets itself. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'te', 'trailer', 'host', 'content-length']);

/**
 * Issue 45: a request for an account whose stream this gateway keeps losing races on goes to
 * the peer that serves that account (PeerRouting), which answers it as the client's gateway
 * would: admission, hold, upstream call, charge and answer happen there, and this gateway
 * passes the answer through, a stream as it comes. Authentication here only finds the account,
 * from the cache, and only while some account is contended; every refusal (a bad key, a bad
 * body, a limit) is the serving gateway's. Both gateways log and count the request. A key
 * restricted to client addresses is served here: the peer would see this gateway's address.
 * The peer says in each answer whether the account's requests reach it from elsewhere too
 * (SHARED); while they do, this gateway keeps handing them over.
 *
 * A peer that refuses the connection (killed, not yet gone from the leases) has the request
 * served here. Once the request has left, its outcome is the peer's: a peer lost mid-request is
 * a 502, as the gateway itself lost would be to a client behind a balancer; its hold is settled
 * by the reaper like any dead gateway's. Either way the peer is passed over until its lease
 * lapses.
 */
export function installPeerForwarding(fastify: FastifyInstance, runtime: Runtime, bodyLimit: number): void {
  const { peerRouting: routing, gatewayLease: lease, authCache: cache, clock, metrics } = runtime;
  if (!routing || !lease || !cache) return;
  const agent = new Agent({ keepAliveTimeout: 30_000, headersTimeout: runtime.config.upstreamTimeoutMs + 30_000, bodyTimeout: 0 });
  fastify.addHook('onClose', async () => agent.close());
  // Before the body is parsed: what is forwarded are the bytes the client sent, which the peer
  // parses and checks; this gateway only reads them whole, so that it can still serve them itself.
  const forward = async (request: FastifyRequest, reply: FastifyReply, payload: Readable): Promise<Readable | undefined> => {
    // A body of unknown length (chunked) or over the limit is left to the refusals here.
    const length = Number(request.headers['content-length']);
    if (!Number.isSafeInteger(length) || length > bodyLimit) return payload;
    const caller = await authenticate(keyFromHeaders(request.raw.rawHeaders), (hash) => cache.find(hash), clock.now()).catch(() => null);
    if (caller === null || caller.allowed_ips) return payload;
    const peer = routing.peerFor(caller.accountId);
    if (peer === null) return payload;
    const body = Buffer.concat(await payload.toArray());
    // A client that leaves is gone for the peer too, which does what it does for any client
    // that leaves (spec 1 rule 4).
    const left = new CallSignal();
    reply.raw.once('close', () => {
      if (!reply.raw.writableFinished) left.abort();
    });
    let answer: Awaited<ReturnType<typeof send>>;
    try {
      answer = await send(new URL(request.url, peer.url), {
        method: 'POST',
        headers: forwardedHeaders(request, lease.id),
        body,
        dispatcher: agent,
        signal: left,
      });
    } catch (err) {
      if (neverSent(err)) {
        routing.unreachable(peer);
        metrics.peerForwards.inc({ outcome: 'unreachable' });
        return Object.assign(Readable.from([body]), { receivedEncodedLength: body.length });
      }
      // Lost mid-request (not the client leaving): its next requests would meet the same dead
      // process until the lease lapses, so they are served here, as a refused one would be.
      if (!left.aborted) {
        routing.unreachable(peer);
        metrics.peerForwards.inc({ outcome: 'lost' });
      }
      throw new ApiError(
        502,
        'api_error',
        'The gateway serving this account stopped answering; the request may not have been carried out.',
        'peer_unavailable',
      );
    }
    metrics.peerForwards.inc({ outcome: 'forwarded' });
    if (answer.headers[SHARED] === '1') routing.stillShared(caller.accountId);
    // The peer's answer as it comes, with the headers it was given there (CORS included).
    reply.hijack();
    const headers = endToEnd(answer.headers);
    delete headers[SHARED];
    reply.raw.writeHead(answer.statusCode, headers);
    await pipeline(answer.body, reply.raw).catch(() => undefined);
    return undefined;
  };
  // Only on the routes that may forward, and as callbacks: a request that is not forwarded, every
  // one while no account is contended, costs a clock read and a few map updates, no promise.
  const preParsing = (request: FastifyRequest, reply: FastifyReply, payload: Readable, done: (err: Error | null, body?: Readable) => void) => {
    if (routing.idle || request.headers[FORWARDED_BY] !== undefined) return done(null, payload);
    forward(request, reply, payload).then((body) => done(null, body), done);
  };
  // Where a request is served: who sends the account's requests here, and, to a forwarding
  // peer, whether anyone else does.
  const onSend = (request: FastifyRequest, reply: FastifyReply, payload: unknown, done: (err: Error | null, payload?: unknown) => void) => {
    const caller = callerOf(request);
    if (caller !== undefined) {
      const by = request.headers[FORWARDED_BY];
      const source = typeof by === 'string' ? by : 'direct';
      routing.noteServed(caller.accountId, source);
      if (source !== 'direct') reply.header(SHARED, routing.sharedBeyond(caller.accountId, source) ? '1' : '0');
    }
    done(null, payload);
  };
  fastify.addHook('onRoute', (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    if (!methods.includes('POST') || !FORWARDED_ROUTES.has(route.url ?? '')) return;
    route.preParsing = [...hookList(route.preParsing), preParsing as never];
    route.onSend = [...hookList(route.onSend), onSend as never];
  });
}

const hookList = <T>(hooks: T | T[] | undefined): T[] => (hooks === undefined ? [] : Array.isArray(hooks) ? hooks : [hooks]);

/** The headers that go on to the next hop: all but HOP_BY_HOP's. */
function endToEnd(given: Record<string, string | string[] | undefined>): Record<string, string | string[]> {
  const headers: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(given)) if (value !== undefined && !HOP_BY_HOP.has(name)) headers[name] = value;
  return headers;
}

function forwardedHeaders(request: FastifyRequest, by: string): Record<string, string | string[]> {
  const headers = endToEnd(request.headers);
  // As any proxy does: the address this gateway got the request from, after those before it.
  const from = request.socket.remoteAddress ?? 'unknown';
  const before = request.headers['x-forwarded-for'];
  headers['x-forwarded-for'] = before ? `${Array.isArray(before) ? before.join(', ') : before}, ${from}` : from;
  headers[FORWARDED_BY] = by;
  return headers;
}
