import type { FastifyInstance, FastifyReply } from 'fastify';
import {
  decideForwarded,
  decodeBatch,
  PEER_BATCH_STALE_MS,
  PEER_ID_HEADER,
  PEER_LEDGER_PATH,
  PEER_SENT_AT_HEADER,
  peerTokenIs,
  type WireAnswer,
} from '@svc/ledger';
import { ApiError } from '@svc/platform';
import type { Runtime } from '@svc/runtime';

/** A batch of MAX_PEER_BATCH charges with their cost lines, with room to spare. */
const BATCH_BODY_LIMIT = 16 * 1024 * 1024;

/**
 * Issue 45, SVC_PEER_FORWARDING=on (or ledger): the owner's side of PeerLedger. A peer proves itself
 * with its lease's token, checked against the hash its lease holds; one this gateway does not
 * know yet (its lease not yet seen) is turned away, and decides the batch itself; so is a batch
 * that comes too late (PEER_BATCH_STALE_MS), whose sender may have given up on it. Each command
 * is decided as one of a request received here would be, and the answer says which of the
 * batch's accounts reach this gateway from elsewhere too, so that the peer keeps handing them
 * over while it would otherwise race them.
 */
export function installPeerLedger(fastify: FastifyInstance, runtime: Runtime): void {
  const { peerLedger, peerRouting: routing, gatewayLease: lease, aggregates } = runtime;
  if (!peerLedger || !routing || !lease) return;
  const refuse = (reply: FastifyReply, err: ApiError) => reply.code(err.status).send(err.toBody());
  const warn = (message: string) => fastify.log.warn(message);
  fastify.post(PEER_LEDGER_PATH, { bodyLimit: BATCH_BODY_LIMIT }, async (request, reply) => {
    const from = request.headers[PEER_ID_HEADER];
    const token = /^Bearer (.+)$/.exec(request.headers.authorization ?? '')?.[1];
    const peer = typeof from === 'string' && from !== lease.id ? lease.peers.find((p) => p.id === from) : undefined;
    if (peer === undefined || token === undefined || !peerTokenIs(peer, token)) {
      return refuse(reply, ApiError.authentication('Not a gateway among this one’s peers.', 'unknown_peer'));
    }
    const sentAt = Number(request.headers[PEER_SENT_AT_HEADER]);
    if (!(runtime.clock.now().getTime() - sentAt <= PEER_BATCH_STALE_MS)) {
      return refuse(
        reply,
        new ApiError(408, 'invalid_request_error', 'The batch came too late to be decided: its sender may have given up on it.', 'stale_batch'),
      );
    }
    const commands = decodeBatch(request.body);
    if (commands === null) return refuse(reply, ApiError.invalidRequest('Expected {"commands": [...]} of account commands.', 'commands'));
    for (const c of commands) routing.noteServed(c.accountId, peer.id);
    const outcomes = await decideForwarded(aggregates, commands, warn);
    const shared = [...new Set(commands.map((c) => c.accountId))].filter((account) => routing.sharedBeyond(account, peer.id));
    const answer: WireAnswer = { outcomes, shared };
    return reply.send(answer);
  });
}
