import { ManualClock } from '@svc/platform';
import type { PeerGateway } from '@svc/ledger';
import { CONTENTION_HOLD_MS, CONTENTION_WINDOW_MS, ONE_OWNER_KEY, PeerRouting, rendezvousScore, UNREACHABLE_MS } from './peer-routing';

const peer = (id: string): PeerGateway => ({ id, url: `http://${id}.internal:8080`, tokenHash: '' });
const PEERS = ['gw-a', 'gw-b', 'gw-c', 'gw-d'].map(peer);

/** The peer that owns `account` among `peers`: the highest score, computed here independently of the class. */
const ownerAmong = (peers: PeerGateway[], account: string) => peers.reduce((a, b) => (rendezvousScore(b.id, account) > rendezvousScore(a.id, account) ? b : a));

/** An account owned by someone other than `self` among PEERS, and one owned by `self`. */
function accounts(self: string): { elsewhere: string; here: string } {
  let elsewhere: string | undefined;
  let here: string | undefined;
  for (let i = 0; !elsewhere || !here; i++) {
    const account = `acct_${i}`;
    if (ownerAmong(PEERS, account).id === self) here ??= account;
    else elsewhere ??= account;
  }
  return { elsewhere, here };
}

/** Given a gateway among PEERS, when its appends lose races, then where its requests go. */
function given(self = 'gw-a', peers: PeerGateway[] = PEERS) {
  const clock = new ManualClock();
  let live = peers;
  const routing = new PeerRouting(self, () => live, clock);
  const lostRaces = (account: string, n: number, apartMs = 100) => {
    for (let i = 0; i < n; i++) {
      routing.noteLostRace(`account-${account}`);
      clock.advance(apartMs);
    }
  };
  return { clock, routing, lostRaces, setPeers: (p: PeerGateway[]) => (live = p) };
}

describe('PeerRouting (issue 45: one writer per contended account)', () => {
  it('serves every account here until its stream is raced', () => {
    const { routing } = given();
    const { elsewhere } = accounts('gw-a');
    expect(routing.idle).toBe(true);
    expect(routing.peerFor(elsewhere)).toBeNull();
  });

  it('sends an account to its owner after two lost races within the window, the same owner every gateway computes', () => {
    const { routing, lostRaces } = given();
    const { elsewhere } = accounts('gw-a');
    lostRaces(elsewhere, 2);
    expect(routing.idle).toBe(false);
    expect(routing.peerFor(elsewhere)).toEqual(ownerAmong(PEERS, elsewhere));
  });

  it('takes one lost race (a gateway catching up on an account served elsewhere) for no contention', () => {
    const { routing, lostRaces } = given();
    const { elsewhere } = accounts('gw-a');
    lostRaces(elsewhere, 1, CONTENTION_WINDOW_MS);
    lostRaces(elsewhere, 1, CONTENTION_WINDOW_MS);
    expect(routing.peerFor(elsewhere)).toBeNull();
  });

  it('keeps serving the accounts it owns itself, contended or not', () => {
    const { routing, lostRaces } = given();
    const { here } = accounts('gw-a');
    lostRaces(here, 3);
    expect(routing.peerFor(here)).toBeNull();
  });

  it('gives every contended account the same owner with oneOwner (SVC_PEER_FORWARDING=on or ledger), the next one when it is passed over', () => {
    const owner = ownerAmong(PEERS, ONE_OWNER_KEY);
    const self = PEERS.find((p) => p !== owner)!;
    const clock = new ManualClock();
    const routing = new PeerRouting(self.id, () => PEERS, clock, true);
    // Accounts whose owners by account differ: one owner for all of them all the same.
    const spread = Array.from({ length: 40 }, (_, i) => `acct_${i}`);
    expect(new Set(spread.map((a) => ownerAmong(PEERS, a).id)).size).toBeGreaterThan(1);
    for (const account of spread) for (let i = 0; i < 2; i++) routing.noteLostRace(`account-${account}`);
    expect(new Set(spread.map((a) => routing.peerFor(a)?.id ?? self.id))).toEqual(new Set([owner.id]));
    routing.unreachable(owner);
    const next = ownerAmong(
      PEERS.filter((p) => p !== owner),
      ONE_OWNER_KEY,
    );
    expect(new Set(spread.map((a) => routing.peerFor(a)?.id ?? self.id))).toEqual(new Set([next.id]));
  });

  it('ignores lost races on streams that are not accounts', () => {
    const { routing } = given();
    routing.noteLostRace('batch-1');
    routing.noteLostRace('batch-1');
    expect(routing.idle).toBe(true);
  });

  it('hands the account over for the hold time after its last lost race, then serves it here again until it is raced again', () => {
    const { routing, lostRaces, clock } = given();
    const { elsewhere } = accounts('gw-a');
    lostRaces(elsewhere, 2);
    // Forwarding does not keep it handed over: only lost races do.
    for (let i = 0; i < 5; i++) expect(routing.peerFor(elsewhere)).not.toBeNull();
    // A race still lost meanwhile (a request served here before) counts from its own time.
    clock.advance(CONTENTION_HOLD_MS - 300);
    lostRaces(elsewhere, 1, CONTENTION_HOLD_MS - 300);
    expect(routing.peerFor(elsewhere)).not.toBeNull();
    clock.advance(300);
    expect(routing.peerFor(elsewhere)).toBeNull();
    expect(routing.idle).toBe(true);
    lostRaces(elsewhere, 2);
    expect(routing.peerFor(elsewhere)).toEqual(ownerAmong(PEERS, elsewhere));
  });

  it('tells a forwarding peer whether others send the account here too, within the window', () => {
    const { routing, clock } = given('gw-b');
    routing.noteServed('acct_1', 'gw-a');
    expect(routing.sharedBeyond('acct_1', 'gw-a')).toBe(false);
    routing.noteServed('acct_1', 'direct');
    expect(routing.sharedBeyond('acct_1', 'gw-a')).toBe(true);
    expect(routing.sharedBeyond('acct_2', 'gw-a')).toBe(false);
    clock.advance(CONTENTION_WINDOW_MS);
    routing.noteServed('acct_1', 'gw-a');
    expect(routing.sharedBeyond('acct_1', 'gw-a')).toBe(false);
    routing.noteServed('acct_1', 'gw-c');
    expect(routing.sharedBeyond('acct_1', 'gw-a')).toBe(true);
  });

  it('keeps handing an account over while its owner says others send it the account too, and no longer', () => {
    const { routing, lostRaces, clock } = given();
    const { elsewhere } = accounts('gw-a');
    lostRaces(elsewhere, 2);
    for (let i = 0; i < 4; i++) {
      clock.advance(CONTENTION_HOLD_MS - 300);
      expect(routing.peerFor(elsewhere)).not.toBeNull();
      routing.stillShared(elsewhere);
    }
    clock.advance(CONTENTION_HOLD_MS);
    expect(routing.peerFor(elsewhere)).toBeNull();
  });

  it('passes over a peer that refused a connection until its lease could have lapsed', () => {
    const { routing, lostRaces, clock } = given();
    const { elsewhere } = accounts('gw-a');
    lostRaces(elsewhere, 2);
    const owner = routing.peerFor(elsewhere)!;
    routing.unreachable(owner);
    const next = ownerAmong(
      PEERS.filter((p) => p.id !== owner.id),
      elsewhere,
    );
    expect(routing.peerFor(elsewhere)).toEqual(next.id === 'gw-a' ? null : next);
    clock.advance(UNREACHABLE_MS);
    lostRaces(elsewhere, 2);
    expect(routing.peerFor(elsewhere)).toEqual(owner);
  });

  it('moves an account when its owner leaves the peers, and forwards nothing while this gateway is not a peer itself', () => {
    const { routing, lostRaces, setPeers } = given();
    const { elsewhere } = accounts('gw-a');
    lostRaces(elsewhere, 2);
    const owner = routing.peerFor(elsewhere)!;
    const rest = PEERS.filter((p) => p.id !== owner.id);
    setPeers(rest);
    const next = ownerAmong(rest, elsewhere);
    expect(routing.peerFor(elsewhere)).toEqual(next.id === 'gw-a' ? null : next);
    setPeers(PEERS.filter((p) => p.id !== 'gw-a'));
    expect(routing.peerFor(elsewhere)).toBeNull();
  });

  it('spreads accounts over the peers (rendezvous hashing), and moves only the leaving peer’s accounts', () => {
    const owners = new Map<string, string>();
    for (let i = 0; i < 4000; i++) owners.set(`acct_${i}`, ownerAmong(PEERS, `acct_${i}`).id);
    for (const p of PEERS) expect([...owners.values()].filter((id) => id === p.id).length).toBeGreaterThan(800);
    const rest = PEERS.slice(1);
    for (const [account, id] of owners) if (id !== PEERS[0].id) expect(ownerAmong(rest, account).id).toBe(id);
  });
});
