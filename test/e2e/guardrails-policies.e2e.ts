import { DEFAULT_POLICY, guardrailsDecider, guardrailsStream, type GuardrailCommand, type GuardrailPolicy } from '@svc/guardrails';
import { usdToNano } from '@svc/platform';
import { api, startGateway, stopGateway, type Call, type StartedGateway } from '../support/gateway';

const ADMIN_TOKEN = 'admin-token-for-guardrail-policies';
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };

type Family = 'chat' | 'messages' | 'responses' | 'embeddings' | 'images';
const FAMILIES: Family[] = ['chat', 'messages', 'responses', 'embeddings', 'images'];
/** The model each family is called with by default. */
const MODEL: Record<Family, string> = { chat: 'sim/echo', messages: 'sim/echo', responses: 'sim/echo', embeddings: 'sim/embed', images: 'sim/image' };

/** One request of a route family with `text` as its prompt. */
function request(family: Family, text: string, model = MODEL[family], extra: Record<string, unknown> = {}): { path: string; body: Record<string, unknown> } {
  switch (family) {
    case 'chat':
      return { path: '/v1/chat/completions', body: { model, max_tokens: 32, messages: [{ role: 'user', content: text }], ...extra } };
    case 'messages':
      return { path: '/v1/messages', body: { model, max_tokens: 32, messages: [{ role: 'user', content: [{ type: 'text', text }] }], ...extra } };
    case 'responses':
      return { path: '/v1/responses', body: { model, max_output_tokens: 32, input: text, ...extra } };
    case 'embeddings':
      return { path: '/v1/embeddings', body: { model, input: [text, 'a second input'], ...extra } };
    case 'images':
      return { path: '/v1/images/generations', body: { model, prompt: text, ...extra } };
  }
}

/** What the upstream received, as the simulator shows it: its echo, or (embeddings, images) the answer derived from the input. */
function received(family: Family, json: any): unknown {
  switch (family) {
    case 'chat':
      return json.choices[0].message.content;
    case 'messages':
      return json.content[0].text;
    case 'responses':
      return json.output.flatMap((o: any) => o.content ?? []).find((c: any) => c.type === 'output_text').text;
    case 'embeddings':
      return json.data.map((d: any) => d.embedding);
    case 'images':
      return json.data.map((d: any) => d.b64_json);
  }
}

/** The error object of a refusal, in the OpenAI shape or the Anthropic one (/v1/messages). */
const errorOf = (json: any): { type: string; code?: string; message: string; param?: string | null } => json.error;

const policy = (name: string, over: Partial<GuardrailPolicy>): GuardrailPolicy => ({ ...DEFAULT_POLICY, name, ...over });

/**
 * Issue 44: access and content policies on every route family of the billed API. A refused
 * request is refused before anything is held: nothing is charged for it.
 */
describe('guardrail access and content policies on every route family (issue 44)', () => {
  let gw: StartedGateway;
  let call: Call;
  let org: string;
  const keys: Record<string, string> = {};

  const send = (key: string, family: Family, text: string, model?: string, extra?: Record<string, unknown>) => {
    const { path, body } = request(family, text, model, extra);
    return call('POST', path, { key, body });
  };
  const usage = async () => {
    const credits = (await call('GET', '/v1/credits', { key: keys.plain })).json.data;
    return { total: usdToNano(credits.total_usage), open: credits.open_holds as number };
  };

  beforeAll(async () => {
    gw = await startGateway({ SVC_ADMIN_TOKEN: ADMIN_TOKEN });
    call = api(gw.url.replace(/\/v1$/, ''));
    const account = async () => (await call('POST', '/admin/accounts', { body: { initial_credits_usd: 50 }, headers: admin })).json.id as string;
    const owner = await account();
    const member = await account();
    org = (await call('POST', '/admin/orgs', { body: { owner_account_id: owner, name: 'Guarded' }, headers: admin })).json.id;
    expect((await call('POST', `/admin/orgs/${org}/members`, { body: { account_id: member, role: 'member' }, headers: admin })).status).toBe(201);
    const keyOf = async (name: string, accountId: string) => {
      const r = await call('POST', `/admin/accounts/${accountId}/keys`, { body: { org_id: org, name }, headers: admin });
      expect(r.status).toBe(201);
      keys[name] = r.json.key;
      return r.json.data.id as string;
    };
    const ids: Record<string, string> = {};
    for (const name of ['plain', 'ignore', 'zdr', 'block', 'redact', 'flag']) ids[name] = await keyOf(name, owner);
    ids.member = await keyOf('member', member);

    const create = (guardrailId: string, p: GuardrailPolicy): GuardrailCommand => ({ type: 'CreateGuardrail', workspaceId: org, guardrailId, policy: p });
    const onKey = (guardrailId: string, key: string): GuardrailCommand => ({
      type: 'AssignGuardrail',
      workspaceId: org,
      guardrailId,
      scope: 'key',
      subjects: [ids[key]],
    });
    const commands: GuardrailCommand[] = [
      // The organization allows these models only; sim/small-8k is not among them.
      create('g_org', policy('Org models', { allowed_models: ['sim/echo', 'sim/claude-echo', 'sim/embed', 'sim/image'] })),
      // The member's guardrail lists sim/small-8k too: it cannot widen the organization's list.
      create('g_member', policy('Member models', { allowed_models: ['sim/echo', 'sim/claude-echo', 'sim/small-8k', 'sim/embed', 'sim/image'] })),
      create('g_ignore', policy('No models', { ignored_models: ['sim/echo', 'sim/embed', 'sim/image'] })),
      create('g_zdr', policy('ZDR only', { enforce_zdr: true })),
      create('g_block', policy('No emails', { content_filter_builtins: [{ slug: 'email', action: 'block' }] })),
      create('g_redact', policy('Hide emails', { content_filter_builtins: [{ slug: 'email', action: 'redact' }] })),
      create('g_flag', policy('Watch projects', { content_filters: [{ pattern: 'project-[0-9]+', action: 'flag', label: 'PROJECT' }] })),
      { type: 'SetOrganizationGuardrail', workspaceId: org, guardrailId: 'g_org' },
      { type: 'AssignGuardrail', workspaceId: org, guardrailId: 'g_member', scope: 'member', subjects: [member] },
      onKey('g_ignore', 'ignore'),
      onKey('g_zdr', 'zdr'),
      onKey('g_block', 'block'),
      onKey('g_redact', 'redact'),
      onKey('g_flag', 'flag'),
    ];
    let position: string | undefined;
    for (const command of commands)
      position = (await gw.runtime.aggregates.handle(guardrailsDecider, guardrailsStream(org), command)).appended?.position ?? position;
    // As the management API's write answers: once the key lookups see it.
    await gw.runtime.projections.waitUntilVisible(position!, ['guardrails']);
  }, 120_000);

  afterAll(() => stopGateway(gw));

  describe('refusals, none of them charged', () => {
    let before: { total: bigint; open: number };
    beforeAll(async () => {
      before = await usage();
    });
    afterAll(async () => {
      await gw.runtime.projections.catchUpAll();
      expect(await usage()).toEqual(before);
    });

    it.each(FAMILIES)('%s: a model a guardrail ignores is 403 model_not_allowed naming the guardrail', async (family) => {
      const r = await send(keys.ignore, family, 'hello');
      expect(r.status).toBe(403);
      expect(errorOf(r.json)).toMatchObject({ type: 'permission_error', code: 'model_not_allowed' });
      expect(errorOf(r.json).message).toContain('g_ignore');
      expect(r.headers.get('x-svc-generation-id')).toBeNull();
    });

    it.each(['chat', 'messages', 'responses'] as Family[])(
      "%s: a member's guardrail cannot widen the organization's allowlist; a key without it is refused the same",
      async (family) => {
        for (const key of [keys.member, keys.plain]) {
          const r = await send(key, family, 'hello', 'sim/small-8k');
          expect(r.status).toBe(403);
          expect(errorOf(r.json)).toMatchObject({ code: 'model_not_allowed' });
          expect(errorOf(r.json).message).toContain('g_org');
        }
      },
    );

    it.each(FAMILIES)(
      '%s: enforce_zdr leaves no endpoint where none retains nothing, or where the request picks one that does: 403 no_endpoint_allowed',
      async (family) => {
        // sim/echo has one zero-data-retention provider (sim): chat's own choice of sim-backup leaves none. Messages and
        // Responses carry no provider preferences: sim/claude-echo, whose one provider retains, leaves none. Nor do
        // sim/embed and sim/image have a zero-data-retention provider.
        const [model, extra] =
          family === 'chat'
            ? [undefined, { provider: { only: ['sim-backup'] } }]
            : family === 'messages' || family === 'responses'
              ? ['sim/claude-echo', {}]
              : [undefined, {}];
        const r = await send(keys.zdr, family, 'hello', model, extra);
        expect(r.status).toBe(403);
        expect(errorOf(r.json)).toMatchObject({ code: 'no_endpoint_allowed' });
        expect(errorOf(r.json).message).toContain('g_zdr');
      },
    );

    it("a request whose own preferences leave no provider is the request's 404, not the guardrail's 403", async () => {
      const r = await send(keys.zdr, 'chat', 'hello', undefined, { provider: { only: ['no-such-provider'] } });
      expect(r.status).toBe(404);
      expect(errorOf(r.json)).toMatchObject({ code: 'no_provider_available', param: 'provider' });
    });

    it.each(FAMILIES)('%s: content a guardrail blocks is 400 content_blocked naming the guardrail and filter, never the text', async (family) => {
      const r = await send(keys.block, family, 'write to ann@example.com please');
      expect(r.status).toBe(400);
      expect(errorOf(r.json)).toMatchObject({ type: 'invalid_request_error', code: 'content_blocked' });
      expect(errorOf(r.json).message).toContain('g_block');
      expect(errorOf(r.json).message).toContain('email');
      expect(JSON.stringify(r.json)).not.toContain('ann@example.com');
    });
  });

  it.each(['chat', 'messages', 'responses'] as Family[])("%s: what the organization's and the member's guardrails both allow passes", async (family) => {
    expect((await send(keys.member, family, 'hello')).status).toBe(200);
  });

  it('enforce_zdr routes to the zero-data-retention endpoint only', async () => {
    for (let i = 0; i < 4; i++) {
      const r = await send(keys.zdr, 'chat', `hello ${i}`);
      expect(r.status).toBe(200);
      expect(r.json.provider).toBe('sim');
    }
  });

  it.each(FAMILIES)('%s: the upstream receives the redacted text', async (family) => {
    const redacted = await send(keys.redact, family, 'write to ann@example.com please');
    expect(redacted.status).toBe(200);
    // The same request, sent already redacted by a key without the filter: the upstream got exactly that.
    const direct = await send(keys.plain, family, 'write to [EMAIL] please');
    expect(direct.status).toBe(200);
    expect(received(family, redacted.json)).toEqual(received(family, direct.json));
    expect(JSON.stringify(redacted.json)).not.toContain('ann@example.com');
    const generation = await call('GET', `/v1/generation?id=${redacted.headers.get('x-svc-generation-id')}`, { key: keys.redact });
    expect(generation.json.data.guardrail_findings).toEqual([{ guardrail_id: 'g_redact', filter: 'email', action: 'redact', count: 1 }]);
  });

  it.each(FAMILIES)('%s: flagged content goes on as sent, and the generation records the finding (counts, never the text)', async (family) => {
    const flagged = await send(keys.flag, family, 'status of project-7 and project-8');
    expect(flagged.status).toBe(200);
    const direct = await send(keys.plain, family, 'status of project-7 and project-8');
    expect(received(family, flagged.json)).toEqual(received(family, direct.json));
    const id = flagged.headers.get('x-svc-generation-id');
    const generation = await call('GET', `/v1/generation?id=${id}`, { key: keys.flag });
    expect(generation.status).toBe(200);
    expect(generation.json.data.guardrail_findings).toEqual([{ guardrail_id: 'g_flag', filter: 'content_filters[0]', action: 'flag', count: 2 }]);
    expect(JSON.stringify(generation.json)).not.toContain('project-7');
    const plain = await call('GET', `/v1/generation?id=${direct.headers.get('x-svc-generation-id')}`, { key: keys.plain });
    expect(plain.json.data.guardrail_findings).toEqual([]);
  });
});
