import type { ChildProcess } from 'node:child_process';
import { PEER_BATCH_STALE_MS, PEER_ID_HEADER, PEER_LEDGER_PATH, PEER_SENT_AT_HEADER, runLedgerAudit } from '@svc/ledger';
import { usdToNano } from '@svc/platform';
import { CONTENTION_HOLD_MS, rendezvousScore } from '@svc/runtime';
import { api, freshPgSchemaUrl, startGateway, stopGateway, type Call, type StartedGateway } from '../support/gateway';
import { spawnGateway } from '../support/second-gateway';
import { answeredCost } from '../support/cost-lines';
import { until } from '../support/until';

const ADMIN_TOKEN = 'admin-token-for-peer-ledger';
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
const ENV = { SVC_PEER_FORWARDING: 'ledger', HOST: '127.0.0.1', SVC_RATE_LIMITS_LIVE: 'rpm=1000000,tpm=1000000000,concurrent=1000' };

interface Gateway {
  call: Call;
  url: string;
  id: string;
  child: ChildProcess | null;
}

interface Outcome {
  status: number;
  stream: boolean;
  cost: bigint;
  id: string | null;
  code?: string;
  via: Gateway;
}

/**
 * Issue 45, SVC_PEER_FORWARDING=ledger: a gateway that keeps losing races on an account's stream
 * serves the account's requests itself, but hands their holds and charges to the account's owner
 * (PeerRouting), in batches: one writer per account, and no request travels.
 */
describe('issue 45: gateways hand a raced account’s holds and charges to its owner (SVC_PEER_FORWARDING=ledger)', () => {
  let first: StartedGateway;
  const gateways: Gateway[] = [];

  beforeAll(async () => {
    const databaseUrl = await freshPgSchemaUrl('peerledger');
    first = await startGateway({ DATABASE_URL: databaseUrl, SVC_ADMIN_TOKEN: ADMIN_TOKEN, ...ENV });
    const firstUrl = first.url.replace(/\/v1$/, '');
    gateways.push({ call: api(firstUrl), url: firstUrl, id: first.runtime.gatewayLease!.id, child: null });
    for (let i = 0; i < 2; i++) {
      const { child, url } = await spawnGateway(databaseUrl, ADMIN_TOKEN, ENV);
      gateways.push({ call: api(url), url, id: '', child });
    }
    const leases = await until('every gateway advertised', async () => {
      const { rows } = await first.runtime.sql.query<{ gateway_id: string; peer_url: string }>(
        'SELECT gateway_id, peer_url FROM gateway_leases WHERE peer_url IS NOT NULL AND expires_at > now()',
      );
      return rows.length === gateways.length ? rows : null;
    });
    for (const g of gateways.slice(1)) g.id = leases.find((r) => r.peer_url === g.url)!.gateway_id;
    // Each knows the others' leases (and so their tokens) once it has renewed after they advertised.
    await until('every peer known here', async () => (first.runtime.gatewayLease!.peers.length === gateways.length ? true : null));
  }, 120_000);

  afterAll(async () => {
    for (const g of gateways) {
      g.child?.removeAllListeners('exit');
      g.child?.kill('SIGTERM');
    }
    await stopGateway(first);
  });

  const ownerOf = (accountId: string, among: Gateway[] = gateways) =>
    among.reduce((a, b) => (rendezvousScore(b.id, accountId) > rendezvousScore(a.id, accountId) ? b : a));

  async function newAccount(): Promise<{ id: string; key: string }> {
    const id = (await gateways[0].call('POST', '/admin/accounts', { body: { initial_credits_usd: 100 }, headers: admin })).json.id as string;
    const key = (await gateways[0].call('POST', `/admin/accounts/${id}/keys`, { body: {}, headers: admin })).json.key as string;
    return { id, key };
  }

  /** The account commands a gateway handed to a peer (svc_peer_ledger_commands_total), by outcome. */
  async function handed(g: Gateway, outcome: 'forwarded' | 'unreachable' | 'lost'): Promise<number> {
    const text = (await g.call('GET', '/metrics', { headers: admin })).json as string;
    return Number(new RegExp(`^svc_peer_ledger_commands_total\\{outcome="${outcome}"\\} (\\d+)$`, 'm').exec(text)?.[1] ?? 0);
  }

  /** `requests` requests of one key, `connections` at a time, dealt round robin over `over`; every third streamed unless `plain`. */
  async function load(over: Gateway[], key: string, requests: number, connections: number, plain = false, onEach?: (done: number) => void) {
    let next = 0;
    const outcomes: Outcome[] = [];
    const worker = async () => {
      for (let n = next++; n < requests; n = next++) {
        const stream = !plain && n % 3 === 0;
        const body = {
          model: 'sim/echo',
          max_tokens: 16,
          messages: [{ role: 'user', content: `ledger ${n}` }],
          ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
        };
        const via = over[n % over.length];
        const r = await via.call('POST', '/v1/chat/completions', { key, body }).catch(() => null);
        if (r === null) outcomes.push({ status: 0, stream, cost: 0n, id: null, via });
        else
          outcomes.push({ status: r.status, stream, cost: answeredCost(r, stream), id: r.headers.get('x-svc-generation-id'), code: r.json?.error?.code, via });
        onEach?.(outcomes.length);
      }
    };
    await Promise.all(Array.from({ length: connections }, worker));
    return outcomes;
  }

  /** What the log charged the account in all, and the balance's move: equal. */
  async function chargedInLog(account: { id: string; key: string }): Promise<bigint> {
    await first.runtime.projections.catchUpAll();
    const { rows } = await first.runtime.sql.query<{ total: string }>(
      "SELECT COALESCE(SUM((data->>'amount_nano')::numeric), 0)::text AS total FROM events WHERE stream = $1 AND type IN ('UsageCharged', 'UsageCorrected')",
      [`account-${account.id}`],
    );
    const credits = (await gateways[0].call('GET', '/v1/credits', { key: account.key })).json.data;
    expect(usdToNano(credits.total_usage)).toBe(BigInt(rows[0].total));
    return BigInt(rows[0].total);
  }

  it('decides the raced account’s holds and charges at its owner, which hands none over, and charges every answer once', async () => {
    const account = await newAccount();
    const owner = ownerOf(account.id);
    const before = await Promise.all(gateways.map((g) => handed(g, 'forwarded')));
    const outcomes = await load(gateways, account.key, 600, 48);
    expect(outcomes.filter((o) => o.status !== 200)).toEqual([]);

    const forwarded = (await Promise.all(gateways.map((g) => handed(g, 'forwarded')))).map((n, i) => n - before[i]);
    expect(forwarded[gateways.indexOf(owner)]).toBe(0);
    // A hold and a charge per request handed over: well over a hundred once the others lost their races.
    expect(forwarded.reduce((a, b) => a + b, 0)).toBeGreaterThan(100);
    expect(outcomes.filter((o) => o.stream && o.id !== null).length).toBe(200);

    expect(new Set(outcomes.map((o) => o.id)).size).toBe(outcomes.length);
    expect(await chargedInLog(account)).toBe(outcomes.reduce((sum, o) => sum + o.cost, 0n));
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
    let account = await newAccount();
    while (ownerOf(account.id) === gateways[0]) account = await newAccount();
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

  it('serves an account whose owner was killed with kill -9 on the others: nothing lost, nothing charged twice', async () => {
    let account = await newAccount();
    while (ownerOf(account.id).child === null) account = await newAccount();
    const owner = ownerOf(account.id);
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
    const reaper = first.background.reaper;
    await until(
      'the killed gateway’s holds settled',
      async () => {
        await reaper.reapOnce();
        await first.runtime.projections.catchUpAll();
        return (await gateways[0].call('GET', '/v1/credits', { key: account.key })).json.data.open_holds === 0;
      },
      40_000,
      500,
    );
    const answered = [...warm, ...after].filter((o) => o.status === 200);
    expect(new Set(answered.map((o) => o.id)).size).toBe(answered.length);
    // A charge whose batch was lost is decided again: found already decided, it is not charged twice.
    expect(await chargedInLog(account)).toBe(answered.reduce((sum, o) => sum + o.cost, 0n));
    const audit = await runLedgerAudit(first.runtime.store, first.runtime.sql);
    expect(audit.violations).toEqual([]);
  }, 180_000);
});
