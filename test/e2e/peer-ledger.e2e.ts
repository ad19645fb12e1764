import { GATEWAY_RENEW_MS, PEER_BATCH_STALE_MS, PEER_ID_HEADER, PEER_LEDGER_PATH, PEER_SENT_AT_HEADER, runLedgerAudit } from '@svc/ledger';
import { usdToNano } from '@svc/platform';
import { CONTENTION_HOLD_MS, ONE_OWNER_KEY } from '@svc/runtime';
import type { StartedGateway } from '../support/gateway';
import { loadPeers as load, startPeers, type PeerGateway as Gateway, type Peers } from '../support/peer-gateways';
import { until } from '../support/until';

const ADMIN_TOKEN = 'admin-token-for-peer-ledger';
const ENV = { SVC_PEER_FORWARDING: 'on', HOST: '127.0.0.1', SVC_RATE_LIMITS_LIVE: 'rpm=1000000,tpm=1000000000,concurrent=1000' };

/**
 * Issue 45, SVC_PEER_FORWARDING=on (or ledger): a gateway that keeps losing races on an account's stream
 * serves the account's requests itself, but hands their holds and charges to the one gateway that
 * owns every contended account (PeerRouting), in batches: one writer per account, its appends
 * gathered in that gateway's commits, and no request travels.
 */
describe('issue 45: gateways hand a raced account’s holds and charges to its owner (SVC_PEER_FORWARDING=on, or ledger)', () => {
  let peers: Peers;
  let first: StartedGateway;
  let gateways: Gateway[];
  /** With `ledger` every contended account has one owner among the live peers (PeerRouting's oneOwner). */
  const theOwner = () => peers.ownerOf(ONE_OWNER_KEY);
  const newAccount = () => peers.newAccount();

  beforeAll(async () => {
    // The owner must be a process the test can kill, and this one must hand over (its routing is read here).
    peers = await startPeers('peerledger', ADMIN_TOKEN, ENV, ONE_OWNER_KEY);
    ({ first, gateways } = peers);
    // Every spawned gateway reads the last one's lease at its next renewal.
    await new Promise((resolve) => setTimeout(resolve, GATEWAY_RENEW_MS + 500));
  }, 180_000);

  afterAll(() => peers.stop());

  /** The account commands a gateway handed to a peer (svc_peer_ledger_commands_total), by outcome. */
  const handed = (g: Gateway, outcome: 'forwarded' | 'unreachable' | 'lost') => peers.counted(g, 'svc_peer_ledger_commands_total', outcome);

  it('decides the raced account’s holds and charges at its owner, which hands none over, and charges every answer once', async () => {
    const account = await newAccount();
    const owner = theOwner();
    const before = await Promise.all(gateways.map((g) => handed(g, 'forwarded')));
    const outcomes = await load(gateways, account.key, 600, 48);
    expect(outcomes.filter((o) => o.status !== 200)).toEqual([]);

    const forwarded = (await Promise.all(gateways.map((g) => handed(g, 'forwarded')))).map((n, i) => n - before[i]);
    expect(forwarded[gateways.indexOf(owner)]).toBe(0);
    // A hold and a charge per request handed over: well over a hundred once the others lost their races.
    expect(forwarded.reduce((a, b) => a + b, 0)).toBeGreaterThan(100);
    expect(outcomes.filter((o) => o.stream && o.id !== null).length).toBe(200);

    expect(new Set(outcomes.map((o) => o.id)).size).toBe(outcomes.length);
    expect(await peers.chargedInLog(account)).toBe(outcomes.reduce((sum, o) => sum + o.cost, 0n));
    const credits = (await gateways[0].call('GET', '/v1/credits', { key: account.key })).json.data;
    expect(credits.open_holds).toBe(0);
    for (const o of outcomes.slice(0, 20)) {
      const generation = await gateways[0].call('GET', `/v1/generation?id=${o.id}`, { key: account.key });
      expect(usdToNano(generation.json.data.total_cost)).toBe(o.cost);
    }
    const audit = await runLedgerAudit(first.runtime.store, first.runtime.sql);
    expect(audit.violations).toEqual([]);
  }, 180_000);

  it('turns away a batch from anyone but a peer with its lease’s token, deciding nothing', async () => {
    const account = await newAccount();
    const target = gateways[1];
    const batch = JSON.stringify({
      commands: [{ accountId: account.id, command: { type: 'AddCredits', amountNano: { $bigint: '1000000000' }, reason: 'x' }, metadata: {} }],
    });
    const post = (headers: Record<string, string>) =>
      fetch(`${target.url}${PEER_LEDGER_PATH}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: batch });
    const now = () => String(Date.now());
    const ownToken = `Bearer ${first.runtime.gatewayLease!.peerToken}`;
    const unknown: Record<string, string>[] = [
      { [PEER_SENT_AT_HEADER]: now() },
      { [PEER_ID_HEADER]: gateways[0].id, [PEER_SENT_AT_HEADER]: now() },
      { [PEER_ID_HEADER]: gateways[0].id, [PEER_SENT_AT_HEADER]: now(), authorization: 'Bearer not-its-token' },
      // A peer's own token, from another peer's name.
      { [PEER_ID_HEADER]: gateways[2].id, [PEER_SENT_AT_HEADER]: now(), authorization: ownToken },
    ];
    for (const headers of unknown) {
      const refused = await post(headers);
      expect(refused.status).toBe(401);
      expect(((await refused.json()) as { error: unknown }).error).toMatchObject({ type: 'authentication_error', code: 'unknown_peer' });
    }
    // Sent longer ago than a sender waits for its answer: it may have given up, so nothing is decided.
    const stale = await post({
      [PEER_ID_HEADER]: gateways[0].id,
      [PEER_SENT_AT_HEADER]: String(Date.now() - PEER_BATCH_STALE_MS - 1_000),
      authorization: ownToken,
    });
    expect([stale.status, ((await stale.json()) as { error: { code: string } }).error.code]).toEqual([408, 'stale_batch']);
    await first.runtime.projections.catchUpAll();
    expect(usdToNano((await gateways[0].call('GET', '/v1/credits', { key: account.key })).json.data.total_credits)).toBe(usdToNano(100));
    // Its own token, from its own lease, in time: the batch is decided (and its answer says so).
    const taken = await post({ [PEER_ID_HEADER]: gateways[0].id, [PEER_SENT_AT_HEADER]: now(), authorization: ownToken });
    expect(taken.status).toBe(200);
    expect(((await taken.json()) as { outcomes: { events: { type: string }[] }[] }).outcomes[0].events[0].type).toBe('CreditsAdded');
    await first.runtime.projections.catchUpAll();
    const credits = (await gateways[0].call('GET', '/v1/credits', { key: account.key })).json.data;
    expect(usdToNano(credits.total_credits)).toBe(usdToNano(101));
  });

  it('stops handing an account over once it is the only gateway sending it', async () => {
    const account = await newAccount();
    const routing = first.runtime.peerRouting!;
    for (let i = 0; i < 2; i++) routing.noteLostRace(`account-${account.id}`);
    const before = await handed(gateways[0], 'forwarded');
    const started = Date.now();
    while (Date.now() - started < CONTENTION_HOLD_MS + 1_000) expect((await load([gateways[0]], account.key, 1, 1, true))[0].status).toBe(200);
    const handedOver = (await handed(gateways[0], 'forwarded')) - before;
    expect(handedOver).toBeGreaterThan(0);
    const outcomes = await load([gateways[0]], account.key, 50, 4, true);
    expect(outcomes.filter((o) => o.status !== 200)).toEqual([]);
    expect((await handed(gateways[0], 'forwarded')) - before).toBe(handedOver);
    expect(routing.peerFor(account.id)).toBeNull();
  });

  it('passes over the owner once it stops answering (SIGSTOP) past its lease, and decides its accounts without it, charged once', async () => {
    const account = await newAccount();
    const owner = theOwner();
    // Still contended: its commands go to the owner of every contended account among the others.
    const answered = await peers.passOverPaused(owner, account, ONE_OWNER_KEY, 20);
    expect(new Set(answered.map((o) => o.id)).size).toBe(answered.length);
    expect(await peers.chargedInLog(account)).toBe(answered.reduce((sum, o) => sum + o.cost, 0n));
    expect((await gateways[0].call('GET', '/v1/credits', { key: account.key })).json.data.open_holds).toBe(0);
    // Back, it renews its lease and is the owner again (the next test kills it).
    await until('the owner back among the peers', async () => (first.runtime.gatewayLease!.peers.some((p) => p.id === owner.id) ? true : null), 30_000, 200);
    await new Promise((resolve) => setTimeout(resolve, GATEWAY_RENEW_MS + 500));
  }, 90_000);

  it('serves an account whose owner was killed with kill -9 on the others: nothing lost, nothing charged twice', async () => {
    const account = await newAccount();
    const owner = theOwner();
    const survivors = gateways.filter((g) => g !== owner);
    const warm = await load(gateways, account.key, 300, 32, true);
    expect(warm.filter((o) => o.status !== 200)).toEqual([]);
    expect((await Promise.all(survivors.map((g) => handed(g, 'forwarded')))).some((n) => n > 0)).toBe(true);

    let killed = false;
    const after = await load(survivors, account.key, 300, 16, true, (done) => {
      if (done >= 40 && !killed) {
        killed = true;
        owner.child!.kill('SIGKILL');
      }
    });
    expect(killed).toBe(true);
    // Only a request whose hold was on its way to the owner fails: a charge on its way is
    // decided again by the survivors.
    const failed = after.filter((o) => o.status !== 200);
    for (const f of failed) expect([f.status, f.code]).toEqual([502, 'peer_unavailable']);
    expect(failed.length).toBeLessThanOrEqual(16);
    let found = 0;
    for (const g of survivors) found += (await handed(g, 'lost')) + (await handed(g, 'unreachable'));
    expect(found).toBeGreaterThan(0);
    expect(after.slice(-100).every((o) => o.status === 200)).toBe(true);

    // The killed gateway's own requests' holds are reaped once its lease lapses.
    await peers.reapUntilSettled(account.key);
    const answered = [...warm, ...after].filter((o) => o.status === 200);
    expect(new Set(answered.map((o) => o.id)).size).toBe(answered.length);
    // A charge whose batch was lost is decided again: found already decided, it is not charged twice.
    expect(await peers.chargedInLog(account)).toBe(answered.reduce((sum, o) => sum + o.cost, 0n));
    const audit = await runLedgerAudit(first.runtime.store, first.runtime.sql);
    expect(audit.violations).toEqual([]);
  }, 180_000);
});
