import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Agent, request as send } from 'undici';
import { authenticate, keyFromHeaders } from '@svc/identity';
import { ApiError } from '@svc/platform';
import type { Runtime } from '@svc/runtime';

/**
 * Set on a request one gateway hands to another: the receiver serves it, whatever it would
 * route, so that two gateways that disagree for a moment about an owner never pass a request
 * back and forth. A client that sends it only has its request served where it landed.
 */
export const FORWARDED_BY = 'x-svc-forwarded-by';

/** The model calls whose holds and charges make an account's stream hot: JSON bodies, one account each. */
const FORWARDED_ROUTES = new Set(['/v1/chat/completions', '/v1/completions', '/v1/messages', '/v1/responses', '/v1/embeddings']);

/** Headers of one connection, not of the request or its answer (RFC 9110 section 7.6.1), and the ones the next hop sets itself. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'te', 'trailer', 'host', 'content-length']);

/** Failures that show the peer never received the request: it is served here instead. */
const NOT_SENT = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT']);

/**
 * Issue 45: a request for an account whose stream this gateway keeps losing races on goes to
 * the peer that serves that account (PeerRouting), which answers it as the client's gateway
 * would: admission, hold, upstream call, charge and answer happen there, and this gateway
 * passes the answer through, a stream as it comes. Authentication here only finds the account,
 * from the cache, and only while some account is contended; every refusal (a bad key, a bad
 * body, a limit) is the serving gateway's. A key restricted to client addresses is served
 * here: the peer would see this gateway's address.
 *
 * A peer that refuses the connection (killed, not yet gone from the leases) has the request
 * served here. Once the request has left, its outcome is the peer's: a peer lost mid-request is
 * a 502, as the gateway itself lost would be to a client behind a balancer; its hold is settled
 * by the reaper like any dead gateway's.
 */
export function installPeerForwarding(fastify: FastifyInstance, runtime: Runtime): void {
  const { peerRouting: routing, gatewayLease: lease, authCache: cache, clock, metrics } = runtime;
  if (!routing || !lease || !cache) return;
  const agent = new Agent({ keepAliveTimeout: 30_000, headersTimeout: runtime.config.upstreamTimeoutMs + 30_000, bodyTimeout: 0 });
  fastify.addHook('onClose', async () => agent.close());
  fastify.addHook('preHandler', async (request: FastifyRequest, reply: FastifyReply) => {
    if (routing.idle || request.method !== 'POST' || request.headers[FORWARDED_BY] !== undefined) return;
    if (!FORWARDED_ROUTES.has(request.routeOptions.url ?? '')) return;
    const caller = await authenticate(keyFromHeaders(request.raw.rawHeaders), (hash) => cache.find(hash), clock.now()).catch(() => null);
    if (caller === null || caller.allowed_ips) return;
    const peer = routing.peerFor(caller.accountId);
    if (peer === null) return;
    let answer: Awaited<ReturnType<typeof send>>;
    try {
      answer = await send(new URL(request.url, peer.url), {
        method: 'POST',
        headers: forwardedHeaders(request, lease.id),
        body: JSON.stringify(request.body),
        dispatcher: agent,
      });
    } catch (err) {
      if (NOT_SENT.has((err as { code?: string }).code ?? '')) {
        routing.unreachable(peer);
        metrics.peerForwards.inc({ outcome: 'unreachable' });
        return;
      }
      throw new ApiError(
        502,
        'api_error',
        'The gateway serving this account stopped answering; the request may not have been carried out.',
        'peer_unavailable',
      );
    }
    metrics.peerForwards.inc({ outcome: 'forwarded' });
    reply.code(answer.statusCode);
    for (const [name, value] of Object.entries(answer.headers)) if (value !== undefined && !HOP_BY_HOP.has(name)) reply.header(name, value);
    return reply.send(answer.body);
  });
}

function forwardedHeaders(request: FastifyRequest, by: string): Record<string, string | string[]> {
  const headers: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(request.headers)) if (value !== undefined && !HOP_BY_HOP.has(name)) headers[name] = value;
  // As any proxy does: the address this gateway got the request from, after those before it.
  const from = request.socket.remoteAddress ?? 'unknown';
  const before = request.headers['x-forwarded-for'];
  headers['x-forwarded-for'] = before ? `${Array.isArray(before) ? before.join(', ') : before}, ${from}` : from;
  headers['content-type'] = 'application/json';
  headers[FORWARDED_BY] = by;
  return headers;
}
