import { Agent, request as send } from 'undici';
import type { EventMetadata } from '@svc/eventstore';
import type { Clock } from '@svc/platform';
import {
  answerOf,
  encodeBatch,
  PEER_ID_HEADER,
  PEER_LEDGER_PATH,
  PEER_SENT_AT_HEADER,
  type AccountCommand,
  type ForwardedCommand,
  type LedgerAnswer,
  type LedgerForwarder,
  type PeerGateway,
  PeerUnavailableError,
  type WireAnswer,
} from '@svc/ledger';
import { neverSent, type PeerRouting } from './peer-routing';

/** Commands in one batch at most: a batch of charges with their cost lines stays well under a megabyte. */
export const MAX_PEER_BATCH = 256;
/**
 * Batches to one peer on their way at once. While they are, the commands that come queue and
 * leave together in the next: the busier the account, the larger the batch, as the aggregate
 * store gathers appends. Two, so that a batch never waits for a whole round trip of another.
 */
const IN_FLIGHT_PER_PEER = 2;

export type PeerLedgerOutcome = 'forwarded' | 'unreachable' | 'lost';

interface Queued extends ForwardedCommand {
  resolve(answer: LedgerAnswer): void;
  reject(err: unknown): void;
}

interface PeerQueue {
  peer: PeerGateway;
  queued: Queued[];
  inFlight: number;
}

/**
 * Issue 45, SVC_PEER_FORWARDING=on (or ledger): a contended account's commands go to its owner
 * (PeerRouting) in batches over kept connections, authenticated with this gateway's lease token
 * (GatewayLease.peerToken). A peer that refuses the connection, or turns the batch away unread,
 * has its commands decided here and is passed over until its lease lapses. A batch lost once
 * sent has an unknown fate, as a command whose store connection broke: each of its commands
 * fails as a connection failure, which the billed-call pipeline already answers (a hold not
 * confirmed is released, a charge is retried, then kept for the reaper), and every command is
 * decided at most once on its stream whoever tries again.
 */
export class PeerLedger implements LedgerForwarder {
  private readonly queues = new Map<string, PeerQueue>();

  constructor(
    private readonly self: { id: string; token: string },
    private readonly routing: PeerRouting,
    private readonly agent: Agent,
    private readonly clock: Clock,
    /** Decides a command here: the route back when the owner cannot take it. */
    private readonly local: (command: ForwardedCommand) => Promise<LedgerAnswer>,
    private readonly counted: (outcome: PeerLedgerOutcome, commands: number) => void,
  ) {}

  forward(accountId: string, command: AccountCommand, metadata: EventMetadata): Promise<LedgerAnswer> | null {
    const { routing } = this;
    const peer = routing.idle ? null : routing.peerFor(accountId);
    if (peer === null) {
      routing.noteServed(accountId, 'direct');
      return null;
    }
    return new Promise((resolve, reject) => {
      let queue = this.queues.get(peer.id);
      if (queue === undefined || queue.peer.url !== peer.url) this.queues.set(peer.id, (queue = { peer, queued: [], inFlight: 0 }));
      queue.queued.push({ accountId, command, metadata, resolve, reject });
      if (queue.inFlight < IN_FLIGHT_PER_PEER) this.dispatch(queue);
    });
  }

  private dispatch(queue: PeerQueue): void {
    const batch = queue.queued.splice(0, MAX_PEER_BATCH);
    if (batch.length === 0) return;
    queue.inFlight++;
    void this.sendBatch(queue.peer, batch).finally(() => {
      queue.inFlight--;
      this.dispatch(queue);
    });
  }

  private async sendBatch(peer: PeerGateway, batch: Queued[]): Promise<void> {
    let answer: WireAnswer;
    try {
      const response = await send(new URL(PEER_LEDGER_PATH, peer.url), {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          authorization: `Bearer ${this.self.token}`,
          [PEER_ID_HEADER]: this.self.id,
          [PEER_SENT_AT_HEADER]: String(this.clock.now().getTime()),
        },
        body: encodeBatch(batch),
        dispatcher: this.agent,
      });
      if (response.statusCode !== 200) {
        await response.body.dump();
        // Turned away unread (it does not know this gateway's lease yet, or the batch came too late): nothing was decided there.
        if (response.statusCode < 500) return this.decideHere(peer, batch);
        throw new Error(`it answered ${response.statusCode}`);
      }
      answer = (await response.body.json()) as WireAnswer;
    } catch (err) {
      if (neverSent(err)) return this.decideHere(peer, batch);
      this.routing.unreachable(peer);
      this.counted('lost', batch.length);
      const lost = new PeerUnavailableError(`the gateway deciding this account stopped answering: ${(err as Error).message}`);
      for (const q of batch) q.reject(lost);
      return;
    }
    this.counted('forwarded', batch.length);
    for (const account of answer.shared) this.routing.stillShared(account);
    batch.forEach((q, i) => {
      try {
        q.resolve(answerOf(answer.outcomes[i]));
      } catch (err) {
        q.reject(err);
      }
    });
  }

  private decideHere(peer: PeerGateway, batch: Queued[]): void {
    this.routing.unreachable(peer);
    this.counted('unreachable', batch.length);
    for (const q of batch) this.local(q).then(q.resolve, q.reject);
  }
}
