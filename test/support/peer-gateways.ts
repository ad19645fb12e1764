import type { ChildProcess } from 'node:child_process';
import { usdToNano } from '@svc/platform';
import { rendezvousScore } from '@svc/runtime';
import { answeredCost } from './cost-lines';
import { api, freshPgSchemaUrl, startGateway, stopGateway, type Call, type StartedGateway } from './gateway';
import { spawnGateway } from './second-gateway';
import { until } from './until';

/** Issue 45: three gateways on one database that hand raced accounts to each other (SVC_PEER_FORWARDING). */
export interface PeerGateway {
  call: Call;
  /** Where it listens (http://127.0.0.1:port), as its lease advertises it. */
  url: string;
  /** Its lease id, as the peers know it. */
  id: string;
  /** null for the one in this process. */
  child: ChildProcess | null;
}

export interface Outcome {
  status: number;
  stream: boolean;
  cost: bigint;
  id: string | null;
  code?: string;
  /** The gateway it was sent to, and when it left and its answer came (ms). */
  via: PeerGateway;
  sentAt: number;
  answeredAt: number;
}

export interface Peers {
  /** In this process, running the projections and the reaper. */
  first: StartedGateway;
  gateways: PeerGateway[];
  /** The gateway that owns `accountId` among `among` (all of them by default): the highest rendezvous score. */
  ownerOf(accountId: string, among?: PeerGateway[]): PeerGateway;
  /** A fresh account with 100 USD and a key. */
  newAccount(): Promise<{ id: string; key: string }>;
  /**
   * Once a killed gateway's lease lapses the reaper settles what it held: reaps until the
   * account shows no open hold.
   */
  reapUntilSettled(key: string): Promise<void>;
  /** What the log charged the account in all, after checking that the balance moved by exactly that. */
  chargedInLog(account: { id: string; key: string }): Promise<bigint>;
  /** A counter of `g`'s /metrics with this outcome label. */
  counted(g: PeerGateway, metric: string, outcome: string): Promise<number>;
  /**
   * Makes `accountId` contended on the first gateway, which then hands it to `owner`; stops the
   * owner (SIGSTOP) until the first reads its lease lapsed; makes the account contended again,
   * now handed to the owner by `ownedBy` among the others (the first serves it if that is itself),
   * and has the first serve `requests` plain requests of `key`, 4 at a time, all answered 200.
   * The owner is resumed whatever happens. A stopped process still accepts connections (the
   * kernel does) but answers nothing: only its lapsed lease tells the others it is gone.
   */
  passOverPaused(owner: PeerGateway, account: { id: string; key: string }, ownedBy: string, requests: number): Promise<Outcome[]>;
  stop(): Promise<void>;
}

/**
 * The first gateway in this process, two spawned; resolves once each advertises its lease and the
 * first knows them all. With `firstOwnsNot`, the first is started again (a new lease id) until
 * another owns that key: a test that must kill the owner cannot kill this process.
 */
export async function startPeers(schema: string, adminToken: string, env: Record<string, string>, firstOwnsNot?: string): Promise<Peers> {
  const admin = { authorization: `Bearer ${adminToken}` };
  const databaseUrl = await freshPgSchemaUrl(schema);
  const startFirst = async () => {
    const started = await startGateway({ DATABASE_URL: databaseUrl, SVC_ADMIN_TOKEN: adminToken, ...env });
    const url = started.url.replace(/\/v1$/, '');
    return { started, gateway: { call: api(url), url, id: started.runtime.gatewayLease!.id, child: null } satisfies PeerGateway };
  };
  let { started: first, gateway } = await startFirst();
  const gateways: PeerGateway[] = [gateway];
  const allKnownHere = () => until('every peer known here', async () => (first.runtime.gatewayLease!.peers.length === gateways.length ? true : null));
  // The leases say where each gateway listens: that is how the spawned ones' ids are known.
  const spawn = async () => {
    const { child, url } = await spawnGateway(databaseUrl, adminToken, env);
    const lease = await until('the gateway advertised', async () => {
      const { rows } = await first.runtime.sql.query<{ gateway_id: string }>(
        'SELECT gateway_id FROM gateway_leases WHERE peer_url = $1 AND expires_at > now()',
        [url],
      );
      return rows[0] ?? null;
    });
    const g: PeerGateway = { call: api(url), url, id: lease.gateway_id, child };
    gateways.push(g);
    await allKnownHere();
    return g;
  };
  for (let i = 0; i < 2; i++) await spawn();
  const ownerOf = (accountId: string, among: PeerGateway[] = gateways) =>
    among.reduce((a, b) => (rendezvousScore(b.id, accountId) > rendezvousScore(a.id, accountId) ? b : a));
  // A fresh id owns the key one time in three. Adding gateways until one outranks the first instead
  // has no bounded expected wait: the first's score is already the highest of three.
  while (firstOwnsNot !== undefined && ownerOf(firstOwnsNot) === gateways[0]) {
    await stopGateway(first);
    ({ started: first, gateway } = await startFirst());
    gateways[0] = gateway;
    await allKnownHere();
  }
  expect(first.runtime.gatewayLease!.peers.find((p) => p.id === gateways[0].id)?.url).toBe(gateways[0].url);
  return {
    first,
    gateways,
    ownerOf,
    async newAccount() {
      const id = (await gateways[0].call('POST', '/admin/accounts', { body: { initial_credits_usd: 100 }, headers: admin })).json.id as string;
      const key = (await gateways[0].call('POST', `/admin/accounts/${id}/keys`, { body: {}, headers: admin })).json.key as string;
      return { id, key };
    },
    async reapUntilSettled(key) {
      await until(
        'the killed gateway’s holds settled',
        async () => {
          await first.background.reaper.reapOnce();
          await first.runtime.projections.catchUpAll();
          return (await gateways[0].call('GET', '/v1/credits', { key })).json.data.open_holds === 0 ? true : null;
        },
        40_000,
        500,
      );
    },
    async chargedInLog(account) {
      await first.runtime.projections.catchUpAll();
      const { rows } = await first.runtime.sql.query<{ total: string }>(
        "SELECT COALESCE(SUM((data->>'amount_nano')::numeric), 0)::text AS total FROM events WHERE stream = $1 AND type IN ('UsageCharged', 'UsageCorrected')",
        [`account-${account.id}`],
      );
      const credits = (await gateways[0].call('GET', '/v1/credits', { key: account.key })).json.data;
      expect(usdToNano(credits.total_usage)).toBe(BigInt(rows[0].total));
      return BigInt(rows[0].total);
    },
    async passOverPaused(owner, account, ownedBy, requests) {
      const routing = first.runtime.peerRouting!;
      const contend = () => {
        for (let i = 0; i < 2; i++) routing.noteLostRace(`account-${account.id}`);
      };
      contend();
      expect(routing.peerFor(account.id)?.id).toBe(owner.id);
      owner.child!.kill('SIGSTOP');
      try {
        await until(
          'the stopped owner gone from the peers',
          async () => (first.runtime.gatewayLease!.peers.some((p) => p.id === owner.id) ? null : true),
          30_000,
          200,
        );
        contend();
        const next = ownerOf(
          ownedBy,
          gateways.filter((g) => g !== owner),
        );
        expect(routing.peerFor(account.id)?.id ?? gateways[0].id).toBe(next.id);
        // Served here or by the next owner: one sent to the stopped process would wait there for
        // minutes (the upstream timeout), past any test's own.
        const answered = await loadPeers([gateways[0]], account.key, requests, 4, true);
        expect(answered.filter((o) => o.status !== 200)).toEqual([]);
        return answered;
      } finally {
        owner.child!.kill('SIGCONT');
      }
    },
    async counted(g, metric, outcome) {
      const text = (await g.call('GET', '/metrics', { headers: admin })).json as string;
      return Number(new RegExp(`^${metric}\\{outcome="${outcome}"\\} (\\d+)$`, 'm').exec(text)?.[1] ?? 0);
    },
    async stop() {
      for (const g of gateways) {
        g.child?.removeAllListeners('exit');
        g.child?.kill('SIGTERM');
      }
      await stopGateway(first);
    },
  };
}

/** `requests` chat completions of one key, `connections` at a time, dealt round robin over `over`; every third streamed unless `plain`. */
export async function loadPeers(over: PeerGateway[], key: string, requests: number, connections: number, plain = false, onEach?: (done: number) => void) {
  let next = 0;
  const outcomes: Outcome[] = [];
  const worker = async () => {
    for (let n = next++; n < requests; n = next++) {
      const stream = !plain && n % 3 === 0;
      const body = {
        model: 'sim/echo',
        max_tokens: 16,
        messages: [{ role: 'user', content: `peer ${n}` }],
        ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
      };
      const via = over[n % over.length];
      const sentAt = performance.now();
      const r = await via.call('POST', '/v1/chat/completions', { key, body }).catch(() => null);
      const answeredAt = performance.now();
      if (r === null) outcomes.push({ status: 0, stream, cost: 0n, id: null, via, sentAt, answeredAt });
      else {
        const cost = answeredCost(r, stream);
        outcomes.push({ status: r.status, stream, cost, id: r.headers.get('x-svc-generation-id'), code: r.json?.error?.code, via, sentAt, answeredAt });
      }
      onEach?.(outcomes.length);
    }
  };
  await Promise.all(Array.from({ length: connections }, worker));
  return outcomes;
}
