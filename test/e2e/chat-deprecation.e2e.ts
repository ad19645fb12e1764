import OpenAI from 'openai';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { BUILTIN_CATALOG_PATH, CATALOG_NOTICES_STREAM } from '@svc/catalog';
import { waitFor } from '@svc/eventstore/testing/contract';
import { ManualClock } from '@svc/platform';
import { api, startGateway, stopGateway } from '../support/gateway';

const SUNSET = '2026-12-01T00:00:00.000Z';

/** The built-in catalog plus two models that retire on SUNSET: one with a replacement, one without. */
function catalogWithRetirements(dir: string): string {
  const catalog = parse(readFileSync(BUILTIN_CATALOG_PATH, 'utf8'));
  const echo = catalog.models.find((m: { id: string }) => m.id === 'sim/echo');
  catalog.models.push(
    { ...echo, id: 'old/replaced', name: 'Old, replaced', deprecation: { sunset: SUNSET, replacement: 'sim/echo', announced: '2026-11-01T00:00:00Z' } },
    { ...echo, id: 'old/orphan', name: 'Old, no replacement', deprecation: { sunset: SUNSET, replacement: null } },
  );
  const path = join(dir, 'catalog.yaml');
  writeFileSync(path, stringify(catalog));
  return path;
}

describe('model deprecation on chat completions (spec 9)', () => {
  const clock = new ManualClock(new Date('2026-11-20T12:00:00Z'));
  let gw: Awaited<ReturnType<typeof startGateway>>;
  let call: ReturnType<typeof api>;
  const body = (model: string) => ({ model, messages: [{ role: 'user', content: 'hello' }], max_tokens: 8 });

  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-e2e-'));
    gw = await startGateway({ SVC_CATALOG: catalogWithRetirements(dir) }, dir, { clock });
    call = api(gw.url);
  }, 60_000);

  afterAll(() => stopGateway(gw));

  it('before the sunset the model answers, with Deprecation, Sunset and the replacement', async () => {
    const r = await call('POST', '/chat/completions', { key: gw.keys.api_key, body: body('old/replaced') });
    expect(r.status).toBe(200);
    expect(r.json.model).toBe('old/replaced');
    expect(r.headers.get('deprecation')).toBe(`@${Date.parse('2026-11-01T00:00:00Z') / 1000}`);
    expect(r.headers.get('sunset')).toBe(new Date(SUNSET).toUTCString());
    expect(r.headers.get('x-svc-model-replacement')).toBe('sim/echo');
    expect((await call('POST', '/chat/completions', { key: gw.keys.api_key, body: body('sim/echo') })).headers.get('deprecation')).toBeNull();
  });

  it('records model.deprecated once at the announcement and once a week before the sunset (spec 6.1)', async () => {
    const notices = async () =>
      (await gw.runtime.store.readStream(CATALOG_NOTICES_STREAM)).map((e) => `${(e.data as { model: string }).model}:${(e.data as { kind: string }).kind}`);
    // The background records the due notices at start; a pass now finds nothing new.
    await waitFor(async () => (await notices()).length === 2);
    expect(await gw.background.recordDeprecationNotices()).toBe(0);
    expect((await notices()).sort()).toEqual(['old/orphan:announced', 'old/replaced:announced']);

    clock.set('2026-11-24T00:00:00Z');
    expect(await gw.background.recordDeprecationNotices()).toBe(2);
    expect(await gw.background.recordDeprecationNotices()).toBe(0);
    expect((await notices()).slice(2).sort()).toEqual(['old/orphan:final', 'old/replaced:final']);
    const [event] = await gw.runtime.store.readStream(CATALOG_NOTICES_STREAM);
    expect(event.type).toBe('ModelDeprecated');
    expect(event.data).toMatchObject({ sunset: SUNSET });
  });

  it('after the sunset the replacement answers, streamed too, naming the model it replaced', async () => {
    clock.set(SUNSET);
    const r = await call('POST', '/chat/completions', { key: gw.keys.api_key, body: body('old/replaced') });
    expect(r.status).toBe(200);
    expect(r.json.model).toBe('sim/echo');
    expect(r.headers.get('x-svc-model-redirected-from')).toBe('old/replaced');
    const generation = await call('GET', `/generation?id=${r.json.id}`, { key: gw.keys.api_key });
    expect(generation.json.data.model).toBe('sim/echo');

    const client = new OpenAI({ baseURL: gw.url, apiKey: gw.keys.api_key, maxRetries: 0 });
    const { data: stream, response } = await client.chat.completions
      .create({ ...body('old/replaced'), stream: true } as OpenAI.ChatCompletionCreateParamsStreaming)
      .withResponse();
    expect(response.headers.get('x-svc-model-redirected-from')).toBe('old/replaced');
    const models = new Set<string>();
    for await (const chunk of stream) models.add(chunk.model);
    expect([...models]).toEqual(['sim/echo']);
  });

  it('after the sunset a model without replacement answers 410 model_retired, and nothing is billed', async () => {
    clock.set(SUNSET);
    const before = (await call('GET', '/credits', { key: gw.keys.api_key })).json.data;
    const r = await call('POST', '/chat/completions', { key: gw.keys.api_key, body: body('old/orphan') });
    expect(r.status).toBe(410);
    expect(r.json.error).toMatchObject({ type: 'model_retired', code: 'model_retired' });
    expect((await call('GET', '/credits', { key: gw.keys.api_key })).json.data).toEqual(before);
  });
});
