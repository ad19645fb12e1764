import { PARAMETERS } from '@svc/providers';
import { WEBHOOK_EVENT_TYPES } from '@svc/webhooks';
import { buildOpenApiDocument, openApiPath, UNDOCUMENTED } from './document';
import { OPERATIONS } from './operations';
import { MAX_EMBEDDING_INPUTS, MAX_IMAGE_SIDE, MAX_SEARCH_QUERIES, MAX_SPEECH_CHARACTERS } from '@svc/interfaces';
import { SCHEMAS, upToPattern } from './components';
import { openApiErrors, responseChecker, responseSchema } from './testing/validation';

/** Every description as if its route were registered: the document the gateway serves when they agree. */
const allRoutes = Object.keys(OPERATIONS).map((key) => {
  const [method, url] = key.split(' ');
  return { method, url };
});

describe('the OpenAPI document built from routes', () => {
  it('is valid OpenAPI 3.1 by the official schema, with unique operation ids', async () => {
    const { document, undocumented, unserved } = buildOpenApiDocument(allRoutes);
    expect(undocumented).toEqual([]);
    expect(unserved).toEqual([]);
    expect(await openApiErrors(document)).toEqual([]);
    const ids = Object.values(document.paths).flatMap((ops) => Object.values(ops).map((op) => op.operationId));
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('the validator refuses what 3.1 does not allow: a response without description, a $ref to nothing', async () => {
    const { document } = buildOpenApiDocument(allRoutes);
    const noDescription = structuredClone(document);
    delete (noDescription.paths['/v1/credits'].get.responses['200'] as { description?: string }).description;
    expect(await openApiErrors(noDescription)).not.toEqual([]);
    const dangling = structuredClone(document);
    (dangling.paths['/v1/credits'].get.responses['200'].content!['application/json'] as { schema: object }).schema = { $ref: '#/components/schemas/Nothing' };
    expect(await openApiErrors(dangling)).not.toEqual([]);
  });

  it('reports a route without a description and keeps it in the document, marked, instead of dropping it', () => {
    const { document, undocumented, unserved } = buildOpenApiDocument([...allRoutes, { method: 'GET', url: '/v1/brand-new/:thing' }]);
    expect(undocumented).toEqual(['GET /v1/brand-new/:thing']);
    expect(unserved).toEqual([]);
    expect(document.paths['/v1/brand-new/{thing}'].get[UNDOCUMENTED]).toBe(true);
  });

  it('reports a description no registered route matches', () => {
    const { unserved, document } = buildOpenApiDocument(allRoutes.filter((r) => !(r.method === 'GET' && r.url === '/v1/credits')));
    expect(unserved).toEqual(['GET /v1/credits']);
    expect(document.paths['/v1/credits']).toBeUndefined();
  });

  it("leaves out HEAD twins, CORS preflights, static files and the gateways' own route, and turns Fastify's parameters into OpenAPI's", () => {
    const routes = [
      { method: 'GET', url: '/v1/keys/:id' },
      { method: 'HEAD', url: '/v1/keys/:id' },
      { method: 'OPTIONS', url: '*' },
      { method: 'GET', url: '/console' },
      { method: 'GET', url: '/console/*' },
      { method: 'GET', url: '/docs/*' },
      { method: 'GET', url: '/v1/models/*' },
      // Issue 45: what one gateway hands another (SVC_PEER_FORWARDING=on or ledger), not the API.
      { method: 'POST', url: '/internal/peer/ledger' },
    ];
    const { document, undocumented } = buildOpenApiDocument(routes);
    expect(undocumented).toEqual([]);
    expect(Object.keys(document.paths).sort()).toEqual(['/v1/keys/{id}', '/v1/models/{id}']);
    expect(Object.keys(document.paths['/v1/keys/{id}'])).toEqual(['get']);
    expect(document.paths['/v1/models/{id}'].get.parameters).toEqual([expect.objectContaining({ name: 'id', in: 'path', required: true })]);
    expect(openApiPath('/admin/orgs/:id/members/:account')).toBe('/admin/orgs/{id}/members/{account}');
  });

  it('issue 41 item 12: every HTTP operation documents 415, those of a body method 413 too; webhooks need no key; speech gives every format', () => {
    const { document } = buildOpenApiDocument(allRoutes);
    const all = Object.entries(document.paths).flatMap(([path, ops]) =>
      Object.entries(ops)
        .filter(([, op]) => !op['x-svc-websocket'])
        .map(([method, op]) => ({ at: `${method} ${path}`, method, statuses: Object.keys(op.responses) })),
    );
    expect(all.length).toBeGreaterThan(90);
    expect(all.filter(({ statuses }) => !statuses.includes('415')).map(({ at }) => at)).toEqual([]);
    expect(all.filter(({ method, statuses }) => method !== 'get' && !statuses.includes('413')).map(({ at }) => at)).toEqual([]);
    for (const hook of Object.values(document.webhooks as Record<string, { post: { security?: unknown[] } }>)) expect(hook.post.security).toEqual([]);
    expect(Object.keys(document.paths['/v1/audio/speech'].post.responses['200'].content!).sort()).toEqual([
      'application/octet-stream',
      'audio/aac',
      'audio/flac',
      'audio/mpeg',
      'audio/opus',
      'audio/pcm',
      'audio/wav',
    ]);
  });

  it('issue 41 item 12: the request rules the server checks, taken from its own constants', () => {
    const { document } = buildOpenApiDocument(allRoutes);
    const check = responseChecker(document);
    const request = (name: string, body: unknown) => check({ $ref: `#/components/schemas/${name}` }, body);
    expect(request('EmbeddingsRequest', { model: 'sim/embed', input: 'hi' })).toEqual([]);
    expect(request('EmbeddingsRequest', { model: '', input: 'hi' })).not.toEqual([]);
    expect(request('EmbeddingsRequest', { model: 'sim/embed', input: '' })).not.toEqual([]);
    expect(request('EmbeddingsRequest', { model: 'sim/embed', input: Array(MAX_EMBEDDING_INPUTS + 1).fill('a') })).not.toEqual([]);
    expect(request('RerankRequest', { model: 'sim/rerank', query: '  ', documents: ['a'] })).not.toEqual([]);
    expect(request('SearchRequest', { query: Array(MAX_SEARCH_QUERIES + 1).fill('q') })).not.toEqual([]);
    expect(request('SpeechRequest', { model: 'sim/tts', input: 'a'.repeat(MAX_SPEECH_CHARACTERS + 1) })).not.toEqual([]);
    expect(request('VideoRequest', { model: 'sim/video' })).not.toEqual([]);
    expect(request('VideoRequest', { model: 'sim/video', prompt: 'a cat', seconds: '4' })).toEqual([]);
    expect(request('ImagesRequest', { model: 'sim/image', prompt: 'a dot', size: `${MAX_IMAGE_SIDE}x1` })).toEqual([]);
    expect(request('ImagesRequest', { model: 'sim/image', prompt: 'a dot', size: `${MAX_IMAGE_SIDE + 1}x1` })).not.toEqual([]);
  });

  it('upToPattern says "1 to max" exactly', () => {
    for (const max of [1, 9, 10, 99, 100, 2048, 4096]) {
      const pattern = new RegExp(`^${upToPattern(max)}$`);
      const accepted = Array.from({ length: max + 20 }, (_, i) => i).filter((n) => pattern.test(String(n)));
      expect(accepted).toEqual(Array.from({ length: max }, (_, i) => i + 1));
      expect(pattern.test(`0${max}`)).toBe(false);
    }
  });

  it('every schema compiles as JSON Schema 2020-12', () => {
    const { document } = buildOpenApiDocument(allRoutes);
    const check = responseChecker(document);
    for (const name of Object.keys(SCHEMAS)) expect(() => check({ $ref: `#/components/schemas/${name}` }, {})).not.toThrow();
  });

  it('documents each webhook event type of spec 6.1 with its payload', async () => {
    const { document } = buildOpenApiDocument(allRoutes);
    expect(Object.keys(document.webhooks as object).sort()).toEqual([...WEBHOOK_EVENT_TYPES].sort());
    const check = responseChecker(document);
    const schema = (document.webhooks as any)['key.revoked'].post.requestBody.content['application/json'].schema;
    expect(check(schema, { id: 'evt_1', type: 'key.revoked', created: 1795000000, data: { key_id: 'key_1' } })).toEqual([]);
    expect(check(schema, { id: 'evt_1', type: 'key.created', created: 1795000000, data: { key_id: 'key_1' } })).not.toEqual([]);
  });
});

describe('request schemas and the fields the gateway knows (libs/providers PARAMETERS)', () => {
  const bodies: Record<string, string> = {
    chat: 'ChatCompletionRequest',
    embed: 'EmbeddingsRequest',
    image: 'ImagesRequest',
    speech: 'SpeechRequest',
    transcription: 'TranscriptionForm',
    translation: 'TranslationForm',
    rerank: 'RerankRequest',
    moderation: 'ModerationRequest',
    search: 'SearchRequest',
    video: 'VideoRequest',
  };
  it.each(Object.entries(bodies))('%s: every known field is documented in %s', (operation, schema) => {
    const documented = Object.keys((SCHEMAS[schema] as { properties: object }).properties);
    expect(PARAMETERS[operation as keyof typeof PARAMETERS].filter((f) => !documented.includes(f))).toEqual([]);
  });
});

describe('schemas are strict enough to catch a wrong field', () => {
  const { document } = buildOpenApiDocument(allRoutes);
  const check = responseChecker(document);
  const completion = {
    id: 'gen-1',
    object: 'chat.completion',
    created: 1795000000,
    model: 'sim/echo',
    choices: [{ index: 0, message: { role: 'assistant', content: 'hi', refusal: null }, logprobs: null, finish_reason: 'stop' }],
    usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2, cost: 0.00001 },
  };
  const schema = responseSchema(document, 'POST', '/v1/chat/completions', 200);

  it('a chat completion fits, with a cost as a number', () => {
    expect(check(schema, completion)).toEqual([]);
  });

  it.each([
    ['usage.cost as a string', { ...completion, usage: { ...completion.usage, cost: '0.00001' } }],
    ['no usage.cost', { ...completion, usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } }],
    ['created as a date string', { ...completion, created: '2026-11-25T00:00:00Z' }],
    ['content as a number', { ...completion, choices: [{ ...completion.choices[0], message: { role: 'assistant', content: 5 } }] }],
  ])('a chat completion with %s does not', (_, body) => {
    expect(check(schema, body)).not.toEqual([]);
  });

  it('an error object with a numeric code, or a field beyond the spec, does not fit spec 2.1', () => {
    const error = responseSchema(document, 'GET', '/v1/credits', 401);
    expect(check(error, { error: { message: 'm', type: 'authentication_error', code: 'invalid_api_key', param: null } })).toEqual([]);
    expect(check(error, { error: { message: 'm', type: 'authentication_error', code: 401, param: null } })).not.toEqual([]);
    expect(check(error, { error: { message: 'm', type: 'authentication_error', status: 401 } })).not.toEqual([]);
  });
});
