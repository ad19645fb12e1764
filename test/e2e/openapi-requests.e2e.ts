import fc from 'fast-check';
import type { JsonSchema, OpenApiDocument } from '@svc/openapi';
import { requestArbitraries, type Overrides } from '@svc/openapi/testing/requests';
import { responseChecker } from '@svc/openapi/testing/validation';
import { startGateway, stopGateway, type StartedGateway } from '../support/gateway';

/**
 * Issue 41 item 12: the OpenAPI document is the truth about requests, not only answers. Bodies
 * are drawn from the document's own request schemas, valid ones and ones breaking exactly one
 * documented constraint, and sent to a running gateway. Over the run:
 *  1. no answer is a 5xx;
 *  2. every status is one the operation documents, and its body fits the documented schema
 *     for that status and content type;
 *  3. a body the document calls valid is never refused with 400 (402, 404, 429... may happen),
 *     and a body breaking a documented constraint is refused with a 4xx.
 * Seeded (OPENAPI_REQUESTS_SEED) and sized (OPENAPI_REQUESTS_RUNS bodies of each kind per
 * operation) so a failure replays exactly.
 */
const SEED = Number(process.env.OPENAPI_REQUESTS_SEED ?? 20261128);
const RUNS = Number(process.env.OPENAPI_REQUESTS_RUNS ?? 15);

interface CatalogModel {
  id: string;
  type: string;
  architecture: { output_modalities: string[] };
  voices?: string[];
  video?: { durations: number[]; aspect_ratios: string[]; resolutions: string[] };
}

interface Case {
  operation: string;
  path: string;
  body: Record<string, unknown>;
  /** Undefined for a valid body; else the constraint it breaks. */
  violated?: string;
}

describe('generated requests against the running gateway: the OpenAPI document is the truth (issue 41 item 12)', () => {
  let gw: StartedGateway;
  let document: OpenApiDocument;
  let check: ReturnType<typeof responseChecker>;
  let key: string;
  let models: CatalogModel[];

  beforeAll(async () => {
    gw = await startGateway();
    key = gw.keys.api_key;
    const root = gw.url.replace(/\/v1$/, '');
    document = (await (await fetch(`${root}/openapi.json`)).json()) as OpenApiDocument;
    check = responseChecker(document);
    models = ((await (await fetch(`${gw.url}/models`, { headers: { authorization: `Bearer ${key}` } })).json()) as { data: CatalogModel[] }).data;
  }, 60_000);

  afterAll(() => stopGateway(gw));

  const of = (type: string, also: (m: CatalogModel) => boolean = () => true) => models.filter((m) => m.type === type && also(m));
  const requestSchema = (method: string, path: string): JsonSchema => {
    const body = (document.paths[path][method] as { requestBody?: { content: Record<string, { schema: JsonSchema }> } }).requestBody;
    return body!.content['application/json'].schema;
  };

  /**
   * What a body cannot say on its own and the document leaves to the catalog (spec 4.17): which
   * model of which type, its voices, its video durations and shapes. Fields documented only as
   * "a choice of the model" (`voice`, `image_url`, video `size`) are drawn from the model or left out.
   */
  function contextsOf(path: string): fc.Arbitrary<Overrides> {
    const cap = fc.integer({ min: 1, max: 16 });
    const model = (type: string, also?: (m: CatalogModel) => boolean) => fc.constantFrom(...of(type, also).map((m) => m.id));
    switch (path) {
      case '/v1/embeddings':
        return fc.constant({ model: model('embedding') });
      case '/v1/rerank':
        return fc.constant({ model: model('rerank') });
      case '/v1/moderations':
        return fc.constant({ model: model('moderation') });
      // The simulated model writes as many tokens as it may, at a pace: a small cap keeps the run
      // short; the caps' own bounds are probed by the near-valid bodies.
      case '/v1/completions':
      case '/v1/chat/completions':
      case '/v1/messages':
      case '/v1/messages/count_tokens':
        return fc.constant({ model: model('chat', (m) => m.id === 'sim/echo'), max_tokens: cap, max_completion_tokens: cap });
      case '/v1/responses':
        // Only the id of a response stored before is one: the document says so in words.
        return fc.constant({ model: model('chat', (m) => m.id === 'sim/echo'), previous_response_id: null, max_output_tokens: cap });
      case '/v1/images/generations':
        return fc.constant({ model: model('image'), image: null });
      case '/v1/search':
        return fc.constant({
          search_tool_name: model('search'),
          search_domain_filter: fc.constantFrom(['example.com'], ['-example.com', '-example.org']),
        });
      case '/v1/audio/speech':
        return fc.constantFrom(...of('audio', (m) => m.architecture.output_modalities.includes('audio'))).map((m) => ({
          model: fc.constant(m.id),
          // The simulated voice speaks in real time: 4,096 characters would take seconds each.
          input: fc.string({ minLength: 1, maxLength: 40 }),
          voice: m.voices && m.voices.length > 0 ? fc.constantFrom(...m.voices) : null,
        }));
      case '/v1/videos':
        return fc.constantFrom(...of('video')).map((m) => ({
          model: fc.constant(m.id),
          seconds: fc.constantFrom(...m.video!.durations.flatMap((d) => [d, String(d)])),
          aspect_ratio: m.video!.aspect_ratios.length > 0 ? fc.constantFrom(...m.video!.aspect_ratios) : null,
          resolution: m.video!.resolutions.length > 0 ? fc.constantFrom(...m.video!.resolutions) : null,
          size: null,
          image_url: null,
        }));
      default:
        return fc.constant({});
    }
  }

  const OPERATIONS = [
    '/v1/chat/completions',
    '/v1/messages',
    '/v1/messages/count_tokens',
    '/v1/responses',
    '/v1/embeddings',
    '/v1/rerank',
    '/v1/moderations',
    '/v1/completions',
    '/v1/images/generations',
    '/v1/search',
    '/v1/audio/speech',
    '/v1/videos',
    '/v1/generations/lookup',
  ];

  function casesOf(path: string, seed: number): Case[] {
    const schema = requestSchema('post', path);
    const arbitraries = contextsOf(path).map((overrides) => requestArbitraries(schema, document.components.schemas, overrides));
    const valid = fc.sample(
      arbitraries.chain((a) => a.valid),
      { seed, numRuns: RUNS },
    );
    const violating = fc.sample(
      arbitraries.chain((a) => a.violating),
      { seed: seed + 1, numRuns: RUNS },
    );
    return [
      ...valid.map((body) => ({ operation: `POST ${path}`, path, body })),
      ...violating.map(({ body, violated }) => ({ operation: `POST ${path}`, path, body, violated })),
    ];
  }

  it('valid and near-valid bodies of the model interfaces: no 5xx, every answer documented, valid never a 400, a broken constraint a 4xx', async () => {
    const mismatches: unknown[] = [];
    const statuses: Record<string, number> = {};
    let requests = 0;
    let providerRefusals = 0;
    const milliseconds: Record<string, number> = {};
    for (const [i, path] of OPERATIONS.entries()) {
      const started = Date.now();
      const cases = casesOf(path, SEED + 10 * i);
      for (const c of cases) {
        // The generated bodies must be what they claim, by the document's own validator.
        const errors = check(requestSchema('post', path), c.body);
        if ((c.violated === undefined) !== (errors.length === 0)) {
          mismatches.push({ generator: c.operation, violated: c.violated ?? 'none', body: c.body, errors });
          continue;
        }
        const answer = await send(path, c.body);
        requests++;
        statuses[`${answer.status}`] = (statuses[`${answer.status}`] ?? 0) + 1;
        if (c.violated === undefined && (answer.body as { error?: { code?: string } } | null)?.error?.code === 'upstream_rejected') providerRefusals++;
        const problem = judge(c, answer);
        if (problem)
          mismatches.push({
            operation: c.operation,
            violated: c.violated ?? 'none',
            body: clip(c.body),
            status: answer.status,
            answer: clip(answer.body),
            problem,
          });
      }
      milliseconds[path] = Date.now() - started;
    }
    // Figures of the run, for the log of CI.
    console.log(JSON.stringify({ requests, operations: OPERATIONS.length, statuses, mismatches: mismatches.length, providerRefusals, milliseconds }));
    expect(mismatches).toEqual([]);
    expect(requests).toBe(OPERATIONS.length * RUNS * 2);
    // Both kinds of body reach the server's checks: some valid ones succeed, and refusals happen.
    expect(Object.keys(statuses).some((s) => s.startsWith('2'))).toBe(true);
    expect(statuses['400'] ?? 0).toBeGreaterThan(0);
  }, 120_000);

  it('every operation answers a content type or encoding it does not take with its documented 415', async () => {
    const root = gw.url.replace(/\/v1$/, '');
    const wrong: unknown[] = [];
    let sent = 0;
    for (const [path, ops] of Object.entries(document.paths)) {
      for (const [method, op] of Object.entries(ops)) {
        if (op['x-svc-websocket']) continue;
        const hasBody = method !== 'get';
        const r = await fetch(`${root}${path.replace(/\{[^}]+\}/g, 'x')}`, {
          method: method.toUpperCase(),
          headers: hasBody ? { 'content-type': 'application/xml' } : { 'content-encoding': 'gzip' },
          body: hasBody ? '<words/>' : undefined,
        });
        sent++;
        const body = await r.text();
        const schema = op.responses[String(r.status)]?.content?.['application/json']?.schema;
        const errors = r.status === 415 && schema ? check(schema, JSON.parse(body)) : ['not a documented 415'];
        if (errors.length > 0) wrong.push({ operation: `${method.toUpperCase()} ${path}`, status: r.status, body: body.slice(0, 200), errors });
      }
    }
    expect(wrong).toEqual([]);
    expect(sent).toBeGreaterThan(90);
  });

  it('the model path takes a model id with its slash, as an OpenAPI client encodes it and as it is', async () => {
    const operation = document.paths['/v1/models/{id}'].get as unknown as { parameters: { name: string; style?: string; 'x-svc-wildcard'?: boolean }[] };
    const id = operation.parameters.find((p) => p.name === 'id')!;
    // The default simple style: a client expands {id} percent-encoded (RFC 6570), slash included.
    expect([id.style, id['x-svc-wildcard']]).toEqual([undefined, true]);
    for (const path of ['/models/sim/echo', `/models/${encodeURIComponent('sim/echo')}`]) {
      const r = await fetch(`${gw.url}${path}`, { headers: { authorization: `Bearer ${key}` } });
      expect(r.status).toBe(200);
      const body = (await r.json()) as { id: string };
      expect(body.id).toBe('sim/echo');
      expect(check(document.paths['/v1/models/{id}'].get.responses['200'].content!['application/json'].schema, body)).toEqual([]);
    }
  });

  async function send(path: string, body: Record<string, unknown>) {
    const r = await fetch(`${gw.url}${path.replace(/^\/v1/, '')}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const type = (r.headers.get('content-type') ?? '').split(';')[0].trim();
    const bytes = Buffer.from(await r.arrayBuffer());
    let parsed: unknown = bytes.length;
    if (type === 'application/json') parsed = JSON.parse(bytes.toString('utf8'));
    return { status: r.status, type, body: parsed };
  }

  /** What is wrong with this answer to this request by the document, or null. */
  function judge(c: Case, answer: { status: number; type: string; body: unknown }): string | null {
    if (answer.status >= 500) return 'a server error';
    const response = (document.paths[c.path].post as { responses: Record<string, { content?: Record<string, { schema: JsonSchema }> }> }).responses[
      String(answer.status)
    ];
    if (!response) return `status ${answer.status} is not documented`;
    const content = response.content?.[answer.type];
    if (!content) return `content type ${answer.type} is not documented for ${answer.status}`;
    if (answer.type === 'application/json') {
      const errors = check(content.schema, answer.body);
      if (errors.length > 0) return `the body does not fit: ${JSON.stringify(errors.slice(0, 3))}`;
    }
    // A provider's own limits (the simulated image provider's 2048-pixel side) are no field rule
    // of the gateway's: its refusal is forwarded as such, and counted apart.
    if (c.violated === undefined && answer.status === 400 && (answer.body as { error?: { code?: string } }).error?.code !== 'upstream_rejected') {
      return 'a body the document calls valid was refused';
    }
    if (c.violated !== undefined && !(answer.status >= 400 && answer.status < 500)) return `a body breaking "${c.violated}" was accepted`;
    return null;
  }
});

/** Bodies as long as a maxLength probe are cut in the report. */
function clip(value: unknown): unknown {
  const text = JSON.stringify(value);
  return text !== undefined && text.length > 600 ? `${text.slice(0, 600)}...` : value;
}
