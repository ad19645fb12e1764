import type { ChildProcess } from 'node:child_process';
import { loadCatalog } from '@svc/catalog';
import { AggregateStore, SqlEventStore } from '@svc/eventstore';
import { DEFAULT_POLICY, guardrailsDecider, guardrailsStream, type GuardrailCommand, type GuardrailPolicy } from '@svc/guardrails';
import { waitForAuthCacheAcks } from '@svc/identity';
import { accountStream } from '@svc/ledger';
import { costOfMeters, tokenWorstCase } from '@svc/metering';
import { systemClock, usdToNano, type SqlRunner } from '@svc/platform';
import { freshPgRunner } from '@svc/platform/testing/pg';
import { countChatPromptTokens } from '@svc/providers';
import { api, type Call } from '../support/gateway';
import { spawnGateway } from '../support/second-gateway';
import { answeredCost } from '../support/cost-lines';
import { until } from '../support/until';
import { spawnWorker } from '../support/worker';

const ADMIN_TOKEN = 'admin-token-for-guardrail-budgets';
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
const REQUESTS = 300;
const CONNECTIONS = 48;
const MAX_TOKENS = 16;
const MESSAGES = [{ role: 'user', content: 'spend under a guardrail' }];

/** What a chat request on sim/echo holds: its worst case at the dearest provider (spec 1 rule 1). */
function worstCase(messages: unknown[], maxTokens: number): bigint {
  const prompt = countChatPromptTokens(messages);
  return loadCatalog()
    .get('sim/echo')!
    .providers.map((route) => costOfMeters(tokenWorstCase(prompt, maxTokens), route.prices))
    .reduce((a, b) => (b > a ? b : a));
}

const policy = (name: string, limitNano: bigint): GuardrailPolicy => ({
  ...DEFAULT_POLICY,
  name,
  limit_nano: limitNano.toString(),
  reset_interval: 'monthly',
});

/**
 * Issue 44: guardrail budgets are holds, at every layer (the organization's, a member's, a
 * key's), decided with the balance in the account's one stream. Requests race on two gateway
 * processes while a worker runs the projections: no layer's charges ever pass its limit.
 */
describe('guardrail budgets held at every layer, across two gateways (issue 44)', () => {
  let sql: SqlRunner & { schema: string };
  let store: SqlEventStore;
  let aggregates: AggregateStore;
  const children: ChildProcess[] = [];
  let gateways: Call[] = [];

  beforeAll(async () => {
    sql = await freshPgRunner('grbudget');
    const url = new URL(process.env.DATABASE_URL!);
    url.searchParams.set('options', `-c search_path=${sql.schema}`);
    const databaseUrl = url.toString();
    const env = { SVC_RATE_LIMITS_LIVE: 'rpm=1000000,tpm=1000000000,concurrent=1000', SVC_RATE_LIMITS_TEST: 'rpm=1000000,tpm=1000000000,concurrent=1000' };
    const first = await spawnGateway(databaseUrl, ADMIN_TOKEN, env);
    children.push(first.child);
    const second = await spawnGateway(databaseUrl, ADMIN_TOKEN, env);
    children.push(second.child);
    const workerEnv: NodeJS.ProcessEnv = { ...process.env, ...env, DATABASE_URL: databaseUrl, SVC_ADMIN_TOKEN: ADMIN_TOKEN };
    delete workerEnv.REDIS_URL;
    delete workerEnv.EVENTSTORE_URL;
    children.push(await spawnWorker(workerEnv));
    gateways = [api(first.url), api(second.url)];
    store = new SqlEventStore(sql);
    aggregates = new AggregateStore(store, systemClock);
  }, 120_000);

  afterAll(async () => {
    for (const child of children) {
      child.removeAllListeners('exit');
      child.kill('SIGTERM');
    }
    await sql?.close();
  });

  const account = async (credits: number) => {
    const r = await gateways[0]('POST', '/admin/accounts', { body: { initial_credits_usd: credits }, headers: admin });
    expect(r.status).toBe(201);
    return r.json.id as string;
  };
  const key = async (accountId: string, orgId?: string) => {
    const r = await gateways[0]('POST', `/admin/accounts/${accountId}/keys`, { body: orgId ? { org_id: orgId } : {}, headers: admin });
    expect(r.status).toBe(201);
    return { id: r.json.data.id as string, secret: r.json.key as string };
  };

  /** Writes guardrail commands as the management API will; resolves once every gateway's key lookup sees them. */
  const guard = async (workspaceId: string, commands: GuardrailCommand[]) => {
    let position: string | undefined;
    for (const command of commands) {
      const handled = await aggregates.handle(guardrailsDecider, guardrailsStream(workspaceId), command);
      position = handled.appended?.position ?? position;
    }
    const assigned = commands.filter((c) => c.type === 'AssignGuardrail' || c.type === 'SetOrganizationGuardrail').length;
    await until(
      'the guardrails projected',
      async () => {
        const { rows } = await sql.query<{ n: string }>('SELECT count(*)::text AS n FROM guardrail_assignments WHERE workspace_id = $1', [workspaceId]);
        return Number(rows[0].n) >= assigned;
      },
      20_000,
    );
    expect(await waitForAuthCacheAcks(sql, position!)).toBe(true);
  };

  /** The account's charges by hold, and the budgets (guardrail ids) each hold was admitted under. */
  const ledgerOf = async (accountId: string) => {
    const events = await store.readStream(accountStream(accountId));
    const budgetsOf = new Map<string, string[]>();
    const charged = new Map<string, bigint>();
    let open = new Set<string>();
    for (const e of events) {
      const d = e.data as Record<string, any>;
      if (e.type === 'HoldPlaced') {
        budgetsOf.set(
          d.hold_id,
          (d.budgets ?? []).map((b: { guardrail_id: string }) => b.guardrail_id),
        );
        open.add(d.hold_id);
      } else if (e.type === 'UsageCharged') {
        expect(charged.has(d.hold_id)).toBe(false);
        charged.set(d.hold_id, BigInt(d.amount_nano));
        open.delete(d.hold_id);
      } else if (e.type === 'HoldReleased' || e.type === 'HoldExpired') open.delete(d.hold_id);
    }
    open = new Set(open);
    const spentUnder = (guardrailId: string) =>
      [...charged].filter(([hold]) => budgetsOf.get(hold)!.includes(guardrailId)).reduce((sum, [, amount]) => sum + amount, 0n);
    return { charged, budgetsOf, open, spentUnder };
  };

  it('never lets the charges under any budget pass its limit; refuses the rest 429 naming the guardrail; charges every answer once', async () => {
    const W = worstCase(MESSAGES, MAX_TOKENS);
    const owner = await account(1000);
    const org = (await gateways[0]('POST', '/admin/orgs', { body: { owner_account_id: owner, name: 'Budgeted' }, headers: admin })).json.id as string;
    const members: string[] = [];
    for (let i = 0; i < 3; i++) {
      const member = await account(1);
      expect((await gateways[0]('POST', `/admin/orgs/${org}/members`, { body: { account_id: member, role: 'member' }, headers: admin })).status).toBe(201);
      members.push(member);
    }
    const keys: { id: string; secret: string; member: number }[] = [];
    for (const [m, member] of members.entries()) for (let i = 0; i < 3; i++) keys.push({ ...(await key(member, org)), member: m });

    // The organization's budget binds all nine keys; member 0's its three; one key of member 1 its own.
    const limits = { org: 90n * W, member: 24n * W, key: 5n * W };
    const ids = { org: 'gr-org', member: 'gr-member', key: 'gr-key' };
    await guard(org, [
      { type: 'CreateGuardrail', workspaceId: org, guardrailId: ids.org, policy: policy('Org cap', limits.org) },
      { type: 'CreateGuardrail', workspaceId: org, guardrailId: ids.member, policy: policy('Member cap', limits.member) },
      { type: 'CreateGuardrail', workspaceId: org, guardrailId: ids.key, policy: policy('Key cap', limits.key) },
      { type: 'SetOrganizationGuardrail', workspaceId: org, guardrailId: ids.org },
      { type: 'AssignGuardrail', workspaceId: org, guardrailId: ids.member, scope: 'member', subjects: [members[0]] },
      { type: 'AssignGuardrail', workspaceId: org, guardrailId: ids.key, scope: 'key', subjects: [keys[3].id] },
    ]);

    let next = 0;
    const outcomes: { key: number; status: number; cost: bigint; id: string | null; error?: Record<string, string>; retryAfter: string | null }[] = [];
    const client = async () => {
      for (let n = next++; n < REQUESTS; n = next++) {
        const k = n % keys.length;
        const stream = n % 4 === 0;
        const body = {
          model: 'sim/echo',
          max_tokens: MAX_TOKENS,
          messages: MESSAGES,
          ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
        };
        const r = await gateways[Math.floor(n / keys.length) % 2]('POST', '/v1/chat/completions', { key: keys[k].secret, body });
        const cost = answeredCost(r, stream);
        outcomes.push({
          key: k,
          status: r.status,
          cost,
          id: r.headers.get('x-svc-generation-id'),
          error: r.json?.error,
          retryAfter: r.headers.get('retry-after'),
        });
      }
    };
    await Promise.all(Array.from({ length: CONNECTIONS }, client));

    expect(outcomes.filter((o) => o.status !== 200 && o.status !== 429)).toEqual([]);
    const refused = outcomes.filter((o) => o.status === 429);
    expect(refused.length).toBeGreaterThan(0);
    for (const o of refused) {
      expect(o.error).toMatchObject({ type: 'insufficient_quota', code: 'budget_limit_reached' });
      expect(o.error!.message).toMatch(/guardrail "(Org|Member|Key) cap" \(gr-(org|member|key)\)/);
      expect(o.retryAfter).not.toBeNull();
    }
    // Each layer did refuse: the key's and the member's before the organization's.
    expect(refused.filter((o) => o.key === 3).some((o) => o.error!.message.includes('gr-key'))).toBe(true);
    expect(refused.filter((o) => keys[o.key].member === 0).some((o) => o.error!.message.includes('gr-member'))).toBe(true);
    expect(refused.some((o) => o.error!.message.includes('gr-org'))).toBe(true);

    await until('no hold left open', async () => (await ledgerOf(owner)).open.size === 0, 30_000);
    const ledger = await ledgerOf(owner);
    const answered = outcomes.filter((o) => o.status === 200);
    // Every answer charged once, what it said it cost; nothing charged for a refusal.
    expect(ledger.charged.size).toBe(answered.length);
    for (const o of answered) expect(ledger.charged.get(o.id!)).toBe(o.cost);
    expect(new Set(answered.map((o) => o.id)).size).toBe(answered.length);

    const byKeys = (pick: (k: (typeof keys)[number], i: number) => boolean) =>
      answered.filter((o) => pick(keys[o.key], o.key)).reduce((sum, o) => sum + o.cost, 0n);
    const spent = { org: byKeys(() => true), member: byKeys((k) => k.member === 0), key: byKeys((_, i) => i === 3) };
    // What the responses cost and what the log says each budget's holds were charged agree, and stay within the limit.
    expect(ledger.spentUnder(ids.org)).toBe(spent.org);
    expect(ledger.spentUnder(ids.member)).toBe(spent.member);
    expect(ledger.spentUnder(ids.key)).toBe(spent.key);
    expect(spent.org).toBeLessThanOrEqual(limits.org);
    expect(spent.member).toBeLessThanOrEqual(limits.member);
    expect(spent.key).toBeLessThanOrEqual(limits.key);
    // Open holds count at their worst case, so a refusal may come while others run below the
    // limit; still, each budget was mostly spent before requests were refused.
    expect(spent.org * 2n).toBeGreaterThan(limits.org);
    expect(spent.member * 2n).toBeGreaterThan(limits.member);
    expect(spent.key * 2n).toBeGreaterThan(limits.key);

    const credits = (await gateways[1]('GET', '/v1/credits', { key: keys[0].secret })).json.data;
    expect(credits.open_holds).toBe(0);
    expect(usdToNano(credits.total_usage)).toBe(spent.org);
    // The generations tell the same story, gateway by gateway.
    for (const o of answered.slice(0, 5)) {
      const g = await gateways[1]('GET', `/v1/generation?id=${o.id}`, { key: keys[o.key].secret });
      expect(g.status).toBe(200);
      expect(usdToNano(g.json.data.total_cost)).toBe(o.cost);
    }
  }, 300_000);

  it('admits a request right after a streamed one whose charge freed part of its hold', async () => {
    const solo = await account(10);
    const { id, secret } = await key(solo);
    const small = [{ role: 'user', content: 'a short one' }];
    const first = worstCase(small, 64);
    const second = worstCase(small, 32);
    // Fits after the first's charge (below its worst case), not after its worst case.
    const limit = first + second - 1n;
    await guard(solo, [
      { type: 'CreateGuardrail', workspaceId: solo, guardrailId: 'gr-solo', policy: policy('Solo cap', limit) },
      { type: 'AssignGuardrail', workspaceId: solo, guardrailId: 'gr-solo', scope: 'key', subjects: [id] },
    ]);
    const streamed = await gateways[0]('POST', '/v1/chat/completions', {
      key: secret,
      body: { model: 'sim/echo', max_tokens: 64, messages: small, stream: true, stream_options: { include_usage: true } },
    });
    expect(streamed.status).toBe(200);
    const frames = (streamed.json as string)
      .split('\n\n')
      .filter((f) => f.startsWith('data: ') && f !== 'data: [DONE]')
      .map((f) => JSON.parse(f.slice(6)));
    const cost = usdToNano(frames[frames.length - 1].usage.cost);
    expect(cost).toBeGreaterThan(0n);
    expect(cost + second).toBeLessThanOrEqual(limit);

    const next = await gateways[1]('POST', '/v1/chat/completions', { key: secret, body: { model: 'sim/echo', max_tokens: 32, messages: small } });
    expect(next.status).toBe(200);
    // Further requests are refused once the budget is spent: the budget is what stopped them.
    let over = next;
    for (let i = 0; i < 100 && over.status === 200; i++) {
      over = await gateways[i % 2]('POST', '/v1/chat/completions', { key: secret, body: { model: 'sim/echo', max_tokens: 32, messages: small } });
    }
    expect(over.status).toBe(429);
    expect(over.json.error).toMatchObject({ code: 'budget_limit_reached' });
    expect(over.json.error.message).toContain('gr-solo');
  }, 120_000);
});
