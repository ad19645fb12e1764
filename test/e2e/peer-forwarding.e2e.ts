import { runLedgerAudit } from '@svc/ledger';
import { usdToNano } from '@svc/platform';
import { CONTENTION_HOLD_MS } from '@svc/runtime';
import type { StartedGateway } from '../support/gateway';
import { loadPeers as load, startPeers, type Outcome, type PeerGateway as Gateway, type Peers } from '../support/peer-gateways';
import { until } from '../support/until';

const ADMIN_TOKEN = 'admin-token-for-peer-forwarding';
const ENV = { SVC_PEER_FORWARDING: 'requests', HOST: '127.0.0.1', SVC_RATE_LIMITS_LIVE: 'rpm=1000000,tpm=1000000000,concurrent=1000' };

/**
 * Issue 45: gateways behind a balancer that spreads every account's requests over all of them
 * raced on the account's stream. With SVC_PEER_FORWARDING=requests each hands the requests of an account
 * it keeps losing races on to the one peer that owns it (PeerRouting): one writer per account.
 */
describe('issue 45: gateways hand a raced account’s requests to one of them (SVC_PEER_FORWARDING=requests)', () => {
  let peers: Peers;
  let first: StartedGateway;
  let gateways: Gateway[];
  const ownerOf = (accountId: string, among?: Gateway[]) => peers.ownerOf(accountId, among);
  const newAccount = () => peers.newAccount();

  beforeAll(async () => {
    peers = await startPeers('peers', ADMIN_TOKEN, ENV);
    ({ first, gateways } = peers);
  }, 120_000);

  afterAll(() => peers.stop());

  /** An account owned by a spawned gateway, contended on this process's (two lost races): its next request here is forwarded. */
  async function contendedHere(): Promise<{ id: string; key: string }> {
    let account = await newAccount();
    while (ownerOf(account.id) === gateways[0]) account = await newAccount();
    for (let i = 0; i < 2; i++) first.runtime.peerRouting!.noteLostRace(`account-${account.id}`);
    return account;
  }

  /** The forwards a gateway counted (svc_peer_forwards_total), by outcome. */
  const forwards = (g: Gateway, outcome: 'forwarded' | 'unreachable' | 'lost') => peers.counted(g, 'svc_peer_forwards_total', outcome);

  /** Every answer charged once, by what it said, and nothing else charged: `charged` is the balance's move. */
  async function expectChargedOnce(key: string, answered: Outcome[], charged: bigint) {
    expect(new Set(answered.map((o) => o.id)).size).toBe(answered.length);
    const credits = (await gateways[0].call('GET', '/v1/credits', { key })).json.data;
    expect(credits.open_holds).toBe(0);
    expect(usdToNano(credits.total_usage)).toBe(charged);
    for (const o of answered.slice(0, 20)) {
      const generation = await gateways[0].call('GET', `/v1/generation?id=${o.id}`, { key });
      expect(generation.status).toBe(200);
      expect(usdToNano(generation.json.data.total_cost)).toBe(o.cost);
    }
  }

  it('forwards the raced account to its owner, which never forwards it, and charges every answer exactly once', async () => {
    const account = await newAccount();
    const owner = ownerOf(account.id);
    const before = await Promise.all(gateways.map((g) => forwards(g, 'forwarded')));
    const outcomes = await load(gateways, account.key, 600, 48);
    expect(outcomes.filter((o) => o.status !== 200)).toEqual([]);

    const forwarded = (await Promise.all(gateways.map((g) => forwards(g, 'forwarded')))).map((n, i) => n - before[i]);
    // The owner serves what it gets; the others, once they have lost races, hand it over.
    expect(forwarded[gateways.indexOf(owner)]).toBe(0);
    expect(forwarded.reduce((a, b) => a + b, 0)).toBeGreaterThan(100);
    // Streamed answers pass through whole (their frames were read above) and keep their generation id.
    expect(outcomes.filter((o) => o.stream && o.id !== null).length).toBe(200);

    await first.runtime.projections.catchUpAll();
    await expectChargedOnce(
      account.key,
      outcomes,
      outcomes.reduce((sum, o) => sum + o.cost, 0n),
    );
    const audit = await runLedgerAudit(first.runtime.store, first.runtime.sql);
    expect(audit.violations).toEqual([]);
  }, 180_000);

  it('bills the whole completion at the owner when the client leaves a forwarded stream mid-way (spec 1 rule 4), once', async () => {
    const account = await contendedHere();
    const before = await forwards(gateways[0], 'forwarded');
    const abort = new AbortController();
    const response = await fetch(`${gateways[0].url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${account.key}`, 'content-type': 'application/json' },
      // 40 content chunks 25 ms apart: about a second of stream after the client has left.
      body: JSON.stringify({
        model: 'sim/echo',
        stream: true,
        messages: [{ role: 'user', content: '#sim {"completion_tokens": 40, "chunk_delay_ms": 25}' }],
      }),
      signal: abort.signal,
    });
    expect(response.status).toBe(200);
    const id = response.headers.get('x-svc-generation-id')!;
    const reader = response.body!.getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).toMatch(/^data: /);
    abort.abort();
    await reader.read().catch(() => undefined);
    expect(await forwards(gateways[0], 'forwarded')).toBe(before + 1);

    const generation = await until('the generation billed', async () => {
      await first.runtime.projections.catchUpAll();
      const g = await gateways[0].call('GET', `/v1/generation?id=${id}`, { key: account.key });
      return g.status === 200 && g.json.data.finished_at !== null ? g.json.data : null;
    });
    expect(generation.tokens_completion).toBe(40);
    const credits = (await gateways[0].call('GET', '/v1/credits', { key: account.key })).json.data;
    expect(credits.open_holds).toBe(0);
    expect(usdToNano(credits.total_usage)).toBe(usdToNano(generation.total_cost));
  });

  it('stops handing an account over once it is the only gateway sending it, and serves it itself', async () => {
    const account = await contendedHere();
    const routing = first.runtime.peerRouting!;
    const before = await forwards(gateways[0], 'forwarded');
    // Only this gateway receives the account (a balancer routing by key, say): its owner answers
    // that nobody else sends it, so once the hold runs out the requests stay here.
    const started = Date.now();
    while (Date.now() - started < CONTENTION_HOLD_MS + 1_000) expect((await load([gateways[0]], account.key, 1, 1, true))[0].status).toBe(200);
    const handedOver = (await forwards(gateways[0], 'forwarded')) - before;
    expect(handedOver).toBeGreaterThan(0);
    const outcomes = await load([gateways[0]], account.key, 50, 4, true);
    expect(outcomes.filter((o) => o.status !== 200)).toEqual([]);
    expect((await forwards(gateways[0], 'forwarded')) - before).toBe(handedOver);
    expect(routing.peerFor(account.id)).toBeNull();
  });

  it('passes over an owner that stopped answering (SIGSTOP) once its lease lapses, and serves its account without it', async () => {
    let account = await newAccount();
    while (ownerOf(account.id).child === null) account = await newAccount();
    const owner = ownerOf(account.id);
    // Still contended: its requests go to the account's owner among the others.
    const answered = await peers.passOverPaused(owner, account, account.id, 20);
    await first.runtime.projections.catchUpAll();
    await expectChargedOnce(
      account.key,
      answered,
      answered.reduce((sum, o) => sum + o.cost, 0n),
    );
    // Back, it renews its lease and is a peer again.
    await until('the owner back among the peers', async () => (first.runtime.gatewayLease!.peers.some((p) => p.id === owner.id) ? true : null), 30_000, 200);
  }, 90_000);

  it('serves an account whose owner was killed with kill -9 on the others: nothing lost, nothing charged twice', async () => {
    // An account owned by a spawned gateway, which the test can kill.
    let account = await newAccount();
    while (ownerOf(account.id).child === null) account = await newAccount();
    const owner = ownerOf(account.id);
    const survivors = gateways.filter((g) => g !== owner);
    const warm = await load(gateways, account.key, 300, 32, true);
    expect(warm.filter((o) => o.status !== 200)).toEqual([]);
    const handedOver = await Promise.all(survivors.map((g) => forwards(g, 'forwarded')));
    expect(handedOver.some((n) => n > 0)).toBe(true);

    // Killed while the survivors keep sending it their share of the account's requests.
    let killed = false;
    const after = await load(survivors, account.key, 300, 16, true, (done) => {
      if (done >= 40 && !killed) {
        killed = true;
        owner.child!.kill('SIGKILL');
      }
    });
    expect(killed).toBe(true);
    // Only requests sent before a survivor learnt of the loss may fail, as the 502 of a gateway
    // lost mid-request: once one has come back so, that survivor serves the account itself.
    const failed = after.filter((o) => o.status !== 200);
    for (const f of failed) expect([f.status, f.code]).toEqual([502, 'peer_unavailable']);
    for (const g of survivors) {
      const lost = failed.filter((o) => o.via === g);
      const learnt = Math.min(...lost.map((o) => o.answeredAt));
      expect(lost.filter((o) => o.sentAt > learnt).map((o) => o.sentAt - learnt)).toEqual([]);
    }
    // Then the survivors found the peer gone, each counting how, and served the account themselves.
    let found = 0;
    for (const g of survivors) {
      const lost = await forwards(g, 'lost');
      expect(lost).toBe(failed.filter((o) => o.via === g).length);
      found += lost + (await forwards(g, 'unreachable'));
    }
    expect(found).toBeGreaterThan(0);
    expect(after.slice(-100).every((o) => o.status === 200)).toBe(true);

    // Once the killed gateway's lease lapses the reaper settles what it held; then every charge
    // in the log is one the balance moved by, every 200 answer among them once.
    await peers.reapUntilSettled(account.key);
    const answered = [...warm, ...after].filter((o) => o.status === 200);
    const total = await peers.chargedInLog(account);
    const charged = answered.reduce((sum, o) => sum + o.cost, 0n);
    // A request killed after its charge but before its answer is charged without a 200: at most the failed ones.
    expect(total - charged).toBeGreaterThanOrEqual(0n);
    expect(total - charged).toBeLessThanOrEqual(BigInt(failed.length) * (answered[0]?.cost ?? 0n));
    expect(new Set(answered.map((o) => o.id)).size).toBe(answered.length);
    const audit = await runLedgerAudit(first.runtime.store, first.runtime.sql);
    expect(audit.violations).toEqual([]);
  }, 180_000);
});
