import type { Clock } from '@svc/platform';
import { accountOfStream, GATEWAY_LEASE_MS, type PeerGateway } from '@svc/ledger';

/**
 * Lost races on one account's stream, this many within CONTENTION_WINDOW_MS, say that other
 * gateways write it at the same time. One alone is not enough: a gateway meeting an account
 * another served since loses one race to catch up, and nobody is racing it.
 */
export const CONTENTION_RACES = 2;
export const CONTENTION_WINDOW_MS = 2_000;
/**
 * A contended account's requests go to its owner for this long after the last lost race, or the
 * last answer of the owner saying that others send it the account's requests too (stillShared).
 * Then they are served here again: if this gateway is the only one left receiving them (the
 * balancer changed, the other gateways stopped), it stops paying the extra hop.
 */
export const CONTENTION_HOLD_MS = 3_000;
/**
 * A peer that refused a connection is passed over this long: a gateway killed with `kill -9`
 * keeps its lease (and its place among the peers) until the lease lapses.
 */
export const UNREACHABLE_MS = GATEWAY_LEASE_MS;
/** What the owner of every contended account is hashed by, when they have one (PeerRouting's oneOwner). */
export const ONE_OWNER_KEY = 'contended-accounts';
/** Failures that show a peer never received what was sent to it (a request, a batch): it is served or decided here instead. */
const NOT_SENT = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT']);
export const neverSent = (err: unknown): boolean => NOT_SENT.has((err as { code?: unknown } | null)?.code as string);

/** Beyond this many entries tracked, the expired ones are swept. */
const SWEEP_ABOVE = 4_096;

/**
 * Issue 45: one writer per contended account. Gateways behind a balancer that spreads requests
 * (round robin, least connections) all serve every account, and two of them appending to one
 * account's stream race: each lost race is a decision taken again and an append retried, and
 * with four gateways one account's holds and charges cost four times the appends one gateway
 * gathers them into. An account on whose stream this gateway keeps losing races is handed to
 * one owner among the live peers, the same one for every gateway (rendezvous hashing over the
 * peers' lease ids), and the others forward its requests there while it stays contended
 * (CONTENTION_HOLD_MS). Accounts nobody races stay where the balancer sends them.
 *
 * Who owns an account is a hint for speed, never a guarantee: two gateways that disagree for a
 * moment (one has not yet seen a peer's lease) only race as they would without it, and every
 * append is still checked against the stream's revision.
 */
export class PeerRouting {
  private readonly races = new Map<string, number[]>();
  private readonly contendedUntil = new Map<string, number>();
  private readonly unreachableUntil = new Map<string, number>();
  /** Per account served here: who sent its requests (`direct`, or the forwarding peer's id), and when last. */
  private readonly sources = new Map<string, Map<string, number>>();
  private sweptAt = 0;
  /** When the last contended account stops being so, unless told otherwise before. */
  private busyUntil = 0;

  constructor(
    /** This gateway's lease id. */
    private readonly selfId: string,
    /** The live gateways that take forwarded requests (this one among them once it does). */
    private readonly peers: () => readonly PeerGateway[],
    private readonly clock: Clock,
    /**
     * Every contended account has the same owner (SVC_PEER_FORWARDING=on or ledger): each gateway
     * commits its appends in groups of its own, and one owner gathers all the contended
     * accounts' appends into its groups, where owners by account would each fill theirs from a
     * few streams. Only holds and charges travel then, so one owner's share of the work is small.
     */
    private readonly oneOwner = false,
  ) {}

  /** No account is contended: nothing to look up before serving a request here. */
  get idle(): boolean {
    return this.clock.now().getTime() >= this.busyUntil;
  }

  /** AggregateStore's onLostRace: another process's append to `stream` beat this one's. */
  noteLostRace(stream: string): void {
    const account = accountOfStream(stream);
    if (account === null) return;
    const now = this.clock.now().getTime();
    if ((this.contendedUntil.get(account) ?? 0) > now) {
      this.contend(account, now);
      return;
    }
    const recent = (this.races.get(account) ?? []).filter((at) => at > now - CONTENTION_WINDOW_MS);
    recent.push(now);
    if (recent.length >= CONTENTION_RACES) {
      this.races.delete(account);
      this.contend(account, now);
    } else {
      this.races.set(account, recent);
    }
    this.sweep(now);
  }

  /** The peer that serves `accountId`'s requests when it is another gateway; null: serve them here. */
  peerFor(accountId: string): PeerGateway | null {
    const until = this.contendedUntil.get(accountId);
    if (until === undefined) return null;
    const now = this.clock.now().getTime();
    if (until <= now) {
      this.contendedUntil.delete(accountId);
      return null;
    }
    const owner = this.ownerOf(accountId, now);
    return owner === null || owner.id === this.selfId ? null : owner;
  }

  /** This gateway serves a request of `accountId` that `source` sent it: `direct` from a client, or a peer's id. */
  noteServed(accountId: string, source: string): void {
    const now = this.clock.now().getTime();
    let seen = this.sources.get(accountId);
    if (seen === undefined) this.sources.set(accountId, (seen = new Map()));
    seen.set(source, now);
    this.sweep(now);
  }

  /**
   * Whether requests of `accountId` reached this gateway from others than `source` within
   * CONTENTION_WINDOW_MS: told to a forwarding peer, which keeps handing the account over while
   * it would otherwise race them, and only then.
   */
  sharedBeyond(accountId: string, source: string): boolean {
    const seen = this.sources.get(accountId);
    if (seen === undefined) return false;
    const since = this.clock.now().getTime() - CONTENTION_WINDOW_MS;
    for (const [other, at] of seen) if (other !== source && at > since) return true;
    return false;
  }

  /** The owner of `accountId` says others send it the account's requests too: keep handing them over. */
  stillShared(accountId: string): void {
    this.contend(accountId, this.clock.now().getTime());
  }

  private contend(accountId: string, now: number): void {
    this.contendedUntil.set(accountId, now + CONTENTION_HOLD_MS);
    this.busyUntil = Math.max(this.busyUntil, now + CONTENTION_HOLD_MS);
  }

  /** `peer` refused a connection or dropped one mid-request: its accounts go to the next owner until its lease lapses. */
  unreachable(peer: PeerGateway): void {
    this.unreachableUntil.set(peer.id, this.clock.now().getTime() + UNREACHABLE_MS);
  }

  /** The live peer with the highest score for the account; null unless this gateway is a peer itself. */
  private ownerOf(accountId: string, now: number): PeerGateway | null {
    let owner: PeerGateway | null = null;
    let best = -1;
    let selfIsPeer = false;
    for (const peer of this.peers()) {
      if (peer.id === this.selfId) selfIsPeer = true;
      else if ((this.unreachableUntil.get(peer.id) ?? 0) > now) continue;
      const score = rendezvousScore(peer.id, this.oneOwner ? ONE_OWNER_KEY : accountId);
      if (score > best) {
        best = score;
        owner = peer;
      }
    }
    // A gateway that does not take forwarded requests does not forward any either: both halves
    // of the rule must see the same peers.
    return selfIsPeer ? owner : null;
  }

  /** Drops what has expired, once the maps grow past SWEEP_ABOVE, at most once per window. */
  private sweep(now: number): void {
    if (now - this.sweptAt < CONTENTION_WINDOW_MS) return;
    if (this.races.size + this.contendedUntil.size + this.sources.size <= SWEEP_ABOVE) return;
    this.sweptAt = now;
    for (const [account, times] of this.races) if (times[times.length - 1] <= now - CONTENTION_WINDOW_MS) this.races.delete(account);
    for (const [account, until] of this.contendedUntil) if (until <= now) this.contendedUntil.delete(account);
    for (const [peer, until] of this.unreachableUntil) if (until <= now) this.unreachableUntil.delete(peer);
    for (const [account, seen] of this.sources) {
      for (const [source, at] of seen) if (at <= now - CONTENTION_WINDOW_MS) seen.delete(source);
      if (seen.size === 0) this.sources.delete(account);
    }
  }
}

/** Rendezvous (highest random weight) hashing: FNV-1a over the pair, then MurmurHash3's finaliser to spread it. */
export function rendezvousScore(peerId: string, accountId: string): number {
  let h = 0x811c9dc5;
  const text = `${peerId}\u0000${accountId}`;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}
