import type { EventMetadata } from '@svc/eventstore';
import { type AccountCommand, accountDecider, accountStream } from '@svc/ledger';
import { ManualClock, usdToNano } from '@svc/platform';
import { api, startGateway, type Call, stopGateway } from '../support/gateway';

const ADMIN_TOKEN = 'admin-token-for-account-endpoint-tests';
const CHAT = '/v1/chat/completions';
const COMPLETIONS = '/v1/completions';

interface Tokens {
  prompt: number;
  completion: number;
  cached?: number;
  reasoning?: number;
}

/** One request as the ledger sees it: who made it, for what, and what its HoldPlaced metadata says. */
interface Req {
  account: string;
  key: string;
  id: string;
  model?: string;
  endpoint?: string;
  user?: string;
  clientRequestId?: string;
}

/**
 * Spec 4.20 account reads end to end over HTTP: GET /v1/generation, POST
 * /v1/generations/lookup and GET /v1/activity. The ledger events are decided through the
 * gateway's own aggregate store (as the chat path does), so the tests choose exact tokens,
 * costs, models, endpoints, end users and days on a moved clock.
 */
describe('account read endpoints', () => {
  const clock = new ManualClock(new Date('2026-10-01T10:00:00Z'));
  let gw: Awaited<ReturnType<typeof startGateway>>;
  let call: Call;
  const admin = (method: string, path: string, body?: unknown) => call(method, path, { body, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });

  const account = async () => {
    const r = await admin('POST', '/admin/accounts', { initial_credits_usd: 5 });
    expect(r.status).toBe(201);
    return r.json.id as string;
  };
  const key = async (accountId: string, body: Record<string, unknown> = {}) => {
    const r = await admin('POST', `/admin/accounts/${accountId}/keys`, body);
    expect(r.status).toBe(201);
    return { id: r.json.data.id as string, secret: r.json.key as string };
  };

  /** Decides a command on the account, then lets every projection apply the whole log. */
  const ledger = async (accountId: string, command: AccountCommand, metadata: EventMetadata = {}) => {
    const r = await gw.runtime.aggregates.handle(accountDecider, accountStream(accountId), command, metadata);
    // The whole log, not just this append: the worker's hold sweeper may have appended too.
    await gw.runtime.projections.catchUpAll();
    return r;
  };
  const place = (r: Req, ttlMs = 60_000) =>
    ledger(
      r.account,
      { type: 'PlaceHold', holdId: r.id, keyId: r.key, amountNano: 1_000_000n, model: r.model ?? 'sim/echo', endpoint: r.endpoint ?? CHAT, ttlMs },
      {
        actor: `key:${r.key}`,
        correlationId: r.id,
        ...(r.clientRequestId === undefined ? {} : { client_request_id: r.clientRequestId }),
        ...(r.user === undefined ? {} : { user: r.user }),
      },
    );
  const stats = (r: Req, t: Tokens) => ({
    model: r.model ?? 'sim/echo',
    provider: 'sim',
    endpoint: r.endpoint ?? CHAT,
    prompt_tokens: t.prompt,
    completion_tokens: t.completion,
    cached_tokens: t.cached ?? 0,
    reasoning_tokens: t.reasoning ?? 0,
    latency_ms: 120,
    ttft_ms: null,
  });
  /** ChargeUsage: billed, or released as zero completion when `t.completion` is 0. */
  const charge = (r: Req, t: Tokens, costNano: bigint) => ledger(r.account, { type: 'ChargeUsage', holdId: r.id, amountNano: costNano, stats: stats(r, t) });
  const fail = (r: Req) =>
    ledger(r.account, {
      type: 'ReleaseHold',
      holdId: r.id,
      errorCode: 'upstream_503',
      stats: { model: r.model ?? 'sim/echo', provider: 'sim', endpoint: r.endpoint ?? CHAT },
    });
  const completed = async (r: Req, t: Tokens, costNano: bigint) => {
    await place(r);
    await charge(r, t, costNano);
  };
  /** A hold nobody settles, expired once its deadline passed, as the worker does. */
  const expired = async (r: Req) => {
    await place(r, 60_000);
    clock.advance(61_000);
    await ledger(r.account, { type: 'ExpireHolds' });
  };

  beforeAll(async () => {
    gw = await startGateway({ SVC_ADMIN_TOKEN: ADMIN_TOKEN }, undefined, { clock });
    call = api(gw.url.replace(/\/v1$/, ''));
  }, 60_000);

  afterAll(() => stopGateway(gw));

  describe('GET /v1/generation and POST /v1/generations/lookup', () => {
    let a: string;
    let full: { id: string; secret: string };
    let readOnly: string;
    let management: string;
    let otherKey: string;
    const g = (n: string) => `gen-lookup-${n}`;
    let ids: Record<'completed' | 'notBilled' | 'failed' | 'expired' | 'open' | 'other', string>;

    beforeAll(async () => {
      a = await account();
      full = await key(a, { scope: 'full' });
      readOnly = (await key(a, { scope: 'read_only' })).secret;
      management = (await key(a, { scope: 'management' })).secret;
      const b = await account();
      const bKey = await key(b);
      otherKey = bKey.secret;
      ids = { completed: g('1'), notBilled: g('2'), failed: g('3'), expired: g('4'), open: g('5'), other: g('b1') };

      const req = (id: string, extra: Partial<Req> = {}): Req => ({ account: a, key: full.id, id, ...extra });
      await completed(
        req(ids.completed, { clientRequestId: 'client-req-1', user: 'alice' }),
        { prompt: 100, completion: 20, cached: 30, reasoning: 5 },
        123_456n,
      );
      await place(req(ids.notBilled));
      await charge(req(ids.notBilled), { prompt: 40, completion: 0 }, 0n);
      await place(req(ids.failed));
      await fail(req(ids.failed));
      await expired(req(ids.expired));
      // Open for longer than the whole test moves the clock: still in progress at the end.
      await place(req(ids.open), 1000 * 24 * 3600 * 1000);
      await completed({ account: b, key: bKey.id, id: ids.other }, { prompt: 1, completion: 1 }, 10n);
    });

    const lookup = (secret: string, body: unknown) => call('POST', '/v1/generations/lookup', { key: secret, body });

    it('GET /v1/generation shows the client request id, the key and the status', async () => {
      const r = await call('GET', `/v1/generation?id=${ids.completed}`, { key: full.secret });
      expect(r.status).toBe(200);
      expect(r.json.data).toMatchObject({
        id: ids.completed,
        status: 'completed',
        key_id: full.id,
        client_request_id: 'client-req-1',
        total_cost: 0.000123456,
      });
      const e = await call('GET', `/v1/generation?id=${ids.expired}`, { key: full.secret });
      expect(e.json.data).toMatchObject({ status: 'expired', client_request_id: null, total_cost: 0, finished_at: expect.any(String) });
    });

    it('answers each id in request order, once, with exact cost and stats; unknown and other-account ids are not found', async () => {
      const r = await lookup(full.secret, { ids: [ids.completed, 'gen-unknown', ids.other, ids.notBilled, ids.completed, ids.failed, ids.expired, ids.open] });
      expect(r.status).toBe(200);
      const data = r.json.data as Record<string, unknown>[];
      expect(data.map((d) => [d.id, d.found, d.status])).toEqual([
        [ids.completed, true, 'completed'],
        ['gen-unknown', false, undefined],
        [ids.other, false, undefined],
        [ids.notBilled, true, 'not_billed'],
        [ids.failed, true, 'failed'],
        [ids.expired, true, 'expired'],
        [ids.open, true, 'in_progress'],
      ]);
      expect(data[0]).toEqual({
        found: true,
        id: ids.completed,
        model: 'sim/echo',
        provider: 'sim',
        endpoint: CHAT,
        status: 'completed',
        key_id: full.id,
        client_request_id: 'client-req-1',
        preset: null,
        created_at: expect.any(String),
        finished_at: expect.any(String),
        tokens_prompt: 100,
        tokens_completion: 20,
        tokens_cached: 30,
        tokens_reasoning: 5,
        total_cost: 0.000123456,
        // Issue 41 item 14: `input` is the input not served from cache (100 prompt tokens, 30 cached).
        usage_by_meter: { input: 70, cached_input: 30, output: 20 },
        latency_ms: 120,
        time_to_first_token_ms: null,
        error_code: null,
        cache_source_id: null,
        // Charged here without cost lines, at an amount the catalog's prices do not give: none derived.
        cost_lines: null,
        byok: false,
        batch: false,
        // Issue 44: no guardrail content filter flagged this request.
        guardrail_findings: [],
      });
      expect(data[1]).toEqual({ id: 'gen-unknown', found: false });
      expect(data[2]).toEqual({ id: ids.other, found: false });
      expect(data[3]).toMatchObject({ tokens_prompt: 40, tokens_completion: 0, total_cost: 0 });
      expect(data[4]).toMatchObject({ error_code: 'upstream_503', total_cost: 0 });
      expect(data[6]).toMatchObject({ finished_at: null, total_cost: 0 });
    });

    it('works with read-only and management keys alike, and shows another account nothing', async () => {
      const body = { ids: Object.values(ids) };
      const asFull = await lookup(full.secret, body);
      for (const secret of [readOnly, management]) {
        const r = await lookup(secret, body);
        expect(r.status).toBe(200);
        expect(r.json).toEqual(asFull.json);
      }
      const other = await lookup(otherKey, body);
      expect(other.json.data.map((d: { id: string; found: boolean }) => [d.id, d.found])).toEqual(Object.values(ids).map((id) => [id, id === ids.other]));
    });

    it('takes 1 to 1,000 ids; anything else is 400 naming ids', async () => {
      const many = Array.from({ length: 1000 }, (_, i) => `gen-none-${i}`);
      const ok = await lookup(full.secret, { ids: many });
      expect(ok.status).toBe(200);
      expect(ok.json.data).toHaveLength(1000);
      for (const body of [{ ids: [...many, 'gen-one-too-many'] }, { ids: [] }, { ids: [ids.completed, 7] }, { ids: ids.completed }, {}, undefined]) {
        const r = await lookup(full.secret, body);
        expect(r.status).toBe(400);
        expect(r.json.error).toMatchObject({ type: 'invalid_request_error', param: 'ids' });
      }
    });

    it('a rebuild of generations answers the same lookup', async () => {
      const body = { ids: Object.values(ids) };
      const before = await lookup(full.secret, body);
      await gw.runtime.projections.rebuild('generations');
      expect((await lookup(full.secret, body)).json).toEqual(before.json);
    });
  });

  describe('GET /v1/activity', () => {
    let c: string;
    let k1: { id: string; secret: string };
    let k2: { id: string; secret: string };
    let readOnly: string;
    let management: string;
    let orgKey: { id: string; secret: string };
    let otherAccountKey: { id: string; secret: string };

    const activity = (secret: string, query = '') => call('GET', `/v1/activity${query}`, { key: secret });
    const row = (date: string, model: string, endpoint: string, n: Partial<Record<string, number>>) => ({
      date,
      model,
      endpoint,
      requests: 0,
      requests_not_billed: 0,
      prompt_tokens: 0,
      completion_tokens: 0,
      cached_tokens: 0,
      reasoning_tokens: 0,
      usage: 0,
      ...n,
    });

    // "Today" is 2026-11-02: the 30 days run from 2026-10-04; 2026-10-03 is the 31st day back.
    const TODAY = '2026-11-02';
    const YESTERDAY = '2026-11-01';
    const OLDEST = '2026-10-04';
    const expected = {
      today: row(TODAY, 'sim/echo', CHAT, { requests: 1, requests_not_billed: 1, prompt_tokens: 20, completion_tokens: 8, usage: 0.000009 }),
      yesterdayEchoChat: row(YESTERDAY, 'sim/echo', CHAT, {
        requests: 2,
        requests_not_billed: 2,
        prompt_tokens: 300,
        completion_tokens: 100,
        cached_tokens: 30,
        reasoning_tokens: 10,
        usage: 0.00012,
      }),
      yesterdayEchoCompletions: row(YESTERDAY, 'sim/echo', COMPLETIONS, { requests: 1, prompt_tokens: 64, completion_tokens: 16, usage: 0.000003 }),
      yesterdaySmall: row(YESTERDAY, 'sim/small-8k', CHAT, { requests: 1, prompt_tokens: 30, completion_tokens: 10, usage: 0.000005 }),
      oldest: row(OLDEST, 'sim/echo', CHAT, { requests: 1, prompt_tokens: 11, completion_tokens: 6, usage: 0.0000011 }),
    };
    const withKey = (keyId: string, ...rows: object[]) => rows.map((r) => ({ ...r, key_id: keyId }));

    beforeAll(async () => {
      clock.set('2026-10-02T10:00:00Z');
      c = await account();
      k1 = await key(c);
      k2 = await key(c);
      readOnly = (await key(c, { scope: 'read_only' })).secret;
      management = (await key(c, { scope: 'management' })).secret;
      // The same account's organization: another workspace, billed to c.
      const org = await admin('POST', '/admin/orgs', { owner_account_id: c, name: 'c-org' });
      expect(org.status).toBe(201);
      orgKey = await key(c, { org_id: org.json.id });
      const d = await account();
      otherAccountKey = await key(d);

      let n = 0;
      const req = (k: { id: string }, extra: Partial<Req> = {}, accountId = c): Req => ({ account: accountId, key: k.id, id: `gen-act-${n++}`, ...extra });

      clock.set('2026-10-03T10:00:00Z');
      await completed(req(k1), { prompt: 10, completion: 5 }, 1_000n);
      clock.set(`${OLDEST}T10:00:00Z`);
      await completed(req(k1), { prompt: 11, completion: 6 }, 1_100n);

      clock.set(`${YESTERDAY}T09:00:00Z`);
      await completed(req(k1, { user: 'alice' }), { prompt: 100, completion: 40, cached: 30, reasoning: 10 }, 50_000n);
      await completed(req(k1, { user: 'bob' }), { prompt: 200, completion: 60 }, 70_000n);
      const zero = req(k1, { user: 'alice' });
      await place(zero);
      await charge(zero, { prompt: 50, completion: 0 }, 0n);
      const failed = req(k1);
      await place(failed);
      await fail(failed);
      await completed(req(k2, { model: 'sim/small-8k' }), { prompt: 30, completion: 10 }, 5_000n);
      await completed(req(k2, { endpoint: COMPLETIONS }), { prompt: 64, completion: 16 }, 3_000n);

      // Placed yesterday, charged after midnight: it counts on the day of its charge.
      const lateNight = req(k1, { user: 'carol' });
      clock.set(`${YESTERDAY}T23:59:50Z`);
      await place(lateNight);
      clock.set(`${TODAY}T00:00:05Z`);
      await charge(lateNight, { prompt: 20, completion: 8 }, 9_000n);

      clock.set(`${TODAY}T08:00:00Z`);
      await expired(req(k1));
      await completed(req(orgKey), { prompt: 5, completion: 5 }, 777n);
      await completed(req(otherAccountKey, {}, d), { prompt: 5, completion: 5 }, 888n);
      clock.set(`${TODAY}T12:00:00Z`);
    });

    it('a management key sees its whole workspace for the last 30 days, per day, model and endpoint, newest first', async () => {
      const r = await activity(management);
      expect(r.status).toBe(200);
      // Not the 31st day back, nor the organization's key (another workspace), nor another account.
      expect(r.json.data).toEqual([expected.today, expected.yesterdayEchoChat, expected.yesterdayEchoCompletions, expected.yesterdaySmall, expected.oldest]);
    });

    it('any other key sees only itself', async () => {
      expect((await activity(k1.secret)).json.data).toEqual(withKey(k1.id, expected.today, expected.yesterdayEchoChat, expected.oldest));
      expect((await activity(k2.secret)).json.data).toEqual(withKey(k2.id, expected.yesterdayEchoCompletions, expected.yesterdaySmall));
      expect((await activity(readOnly)).json).toEqual({ data: [] });
      expect((await activity(orgKey.secret)).json.data).toEqual(
        withKey(orgKey.id, row(TODAY, 'sim/echo', CHAT, { requests: 1, prompt_tokens: 5, completion_tokens: 5, usage: 0.000000777 })),
      );
      expect((await activity(otherAccountKey.secret)).json.data).toEqual(
        withKey(otherAccountKey.id, row(TODAY, 'sim/echo', CHAT, { requests: 1, prompt_tokens: 5, completion_tokens: 5, usage: 0.000000888 })),
      );
    });

    it('key_id: a management key picks one key of its workspace; other keys may name only themselves', async () => {
      const one = await activity(management, `?key_id=${k2.id}`);
      expect(one.status).toBe(200);
      expect(one.json.data).toEqual(withKey(k2.id, expected.yesterdayEchoCompletions, expected.yesterdaySmall));
      expect((await activity(k1.secret, `?key_id=${k1.id}`)).json.data).toEqual(withKey(k1.id, expected.today, expected.yesterdayEchoChat, expected.oldest));

      for (const [secret, keyId] of [
        [k1.secret, k2.id],
        [readOnly, k1.id],
      ]) {
        const r = await activity(secret, `?key_id=${keyId}`);
        expect(r.status).toBe(403);
        expect(r.json.error).toMatchObject({ type: 'permission_error', code: 'management_key_required' });
      }
      for (const keyId of [orgKey.id, otherAccountKey.id, 'key_unknown']) {
        const r = await activity(management, `?key_id=${keyId}`);
        expect(r.status).toBe(404);
        expect(r.json.error).toMatchObject({ type: 'not_found_error', code: 'key_not_found', param: 'key_id' });
      }
    });

    it('user: only the requests made for that end user', async () => {
      expect((await activity(management, '?user=alice')).json.data).toEqual([
        row(YESTERDAY, 'sim/echo', CHAT, {
          requests: 1,
          requests_not_billed: 1,
          prompt_tokens: 100,
          completion_tokens: 40,
          cached_tokens: 30,
          reasoning_tokens: 10,
          usage: 0.00005,
        }),
      ]);
      expect((await activity(k1.secret, '?user=carol')).json.data).toEqual(
        withKey(k1.id, row(TODAY, 'sim/echo', CHAT, { requests: 1, prompt_tokens: 20, completion_tokens: 8, usage: 0.000009 })),
      );
      expect((await activity(k2.secret, '?user=alice')).json.data).toEqual([]);
    });

    it('date: one day of the 30; any other date is 400 naming date', async () => {
      expect((await activity(management, `?date=${YESTERDAY}`)).json.data).toEqual([
        expected.yesterdayEchoChat,
        expected.yesterdayEchoCompletions,
        expected.yesterdaySmall,
      ]);
      expect((await activity(management, `?date=${OLDEST}`)).json.data).toEqual([expected.oldest]);
      for (const date of ['2026-10-03', '2026-11-03', '2026-02-30', 'yesterday', `${TODAY}&date=${YESTERDAY}`]) {
        const r = await activity(management, `?date=${date}`);
        expect(r.status).toBe(400);
        expect(r.json.error).toMatchObject({ type: 'invalid_request_error', param: 'date' });
      }
      for (const param of ['key_id', 'user']) {
        const r = await activity(management, `?${param}=`);
        expect(r.status).toBe(400);
        expect(r.json.error).toMatchObject({ type: 'invalid_request_error', param });
      }
    });

    it('a rebuild of activity from the log yields the same rows', async () => {
      const tables = async () => ({
        daily: (await gw.runtime.sql.query('SELECT * FROM activity_daily ORDER BY account_id, key_id, day, model, endpoint, user_id')).rows,
        open: (await gw.runtime.sql.query('SELECT * FROM activity_open_holds ORDER BY account_id, hold_id')).rows,
      });
      const before = await tables();
      const answer = await activity(management);
      expect(before.daily.length).toBeGreaterThan(5);
      await gw.runtime.projections.rebuild('activity');
      expect(await tables()).toEqual(before);
      expect((await activity(management)).json).toEqual(answer.json);
    });

    it('a chat completion shows at once, with its X-Client-Request-Id and end user', async () => {
      const before = (await activity(k1.secret, `?date=${TODAY}`)).json.data[0];
      const chat = await call('POST', '/v1/chat/completions', {
        key: k1.secret,
        headers: { 'x-client-request-id': 'client-req-http' },
        body: { model: 'sim/echo', messages: [{ role: 'user', content: 'hi' }], max_tokens: 8, user: 'dave' },
      });
      expect(chat.status).toBe(200);
      const usage = chat.json.usage;
      const after = (await activity(k1.secret, `?date=${TODAY}`)).json.data[0];
      expect(after).toMatchObject({
        date: TODAY,
        model: 'sim/echo',
        endpoint: CHAT,
        requests: before.requests + 1,
        prompt_tokens: before.prompt_tokens + usage.prompt_tokens,
      });
      expect(usdToNano(after.usage) - usdToNano(before.usage)).toBe(usdToNano(usage.cost));
      expect((await activity(k1.secret, '?user=dave')).json.data).toEqual(
        withKey(
          k1.id,
          row(TODAY, 'sim/echo', CHAT, { requests: 1, prompt_tokens: usage.prompt_tokens, completion_tokens: usage.completion_tokens, usage: usage.cost }),
        ),
      );
      const generation = await call('GET', `/v1/generation?id=${chat.json.id}`, { key: k1.secret });
      expect(generation.json.data).toMatchObject({ status: 'completed', key_id: k1.id, client_request_id: 'client-req-http', total_cost: usage.cost });
    });

    it('the 30 days follow the clock: a day later the oldest day is gone and it is the one out of range', async () => {
      clock.set('2026-11-03T00:30:00Z');
      const dates = (await activity(management)).json.data.map((d: { date: string }) => d.date);
      expect(dates).toEqual([TODAY, YESTERDAY, YESTERDAY, YESTERDAY]);
      expect((await activity(management, `?date=${OLDEST}`)).status).toBe(400);
      expect((await activity(management, '?date=2026-11-03')).json).toEqual({ data: [] });
    });
  });
});
