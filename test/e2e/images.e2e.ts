import OpenAI from 'openai';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { BUILTIN_CATALOG_PATH } from '@svc/catalog';
import { imageSealContext, STORED_IMAGE_TTL_MS, StoredImages } from '@svc/conversations';
import { ManualClock, openSecret, usdToNano } from '@svc/platform';
import { api, createAccountWithKey, freshPgSchemaUrl, startGateway, startWithClient, stopGateway, type Call, type StartedGateway } from '../support/gateway';
import { costLinesOf } from '../support/cost-lines';

// sim/image in the built-in catalog: $0.04 per image, on both of its providers.
const NANO_PER_IMAGE = 40_000_000n;
// test/image-tokens below: gpt-image-1's $5 per million text input tokens, $40 per million image output tokens.
const NANO_PER_INPUT_TOKEN = 5_000n;
const NANO_PER_OUTPUT_TOKEN = 40_000n;

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/** Width and height from a PNG's IHDR chunk, which the format puts first. */
function pngSize(bytes: Buffer): { width: number; height: number } {
  expect(bytes.subarray(0, 8).equals(PNG_SIGNATURE)).toBe(true);
  expect(bytes.toString('latin1', 12, 16)).toBe('IHDR');
  return { width: bytes.readUInt32BE(16), height: bytes.readUInt32BE(20) };
}

/** The built-in catalog plus an image model billed per token that takes no image input. */
function catalogWithTokenImageModel(dir: string): string {
  const catalog = parse(readFileSync(BUILTIN_CATALOG_PATH, 'utf8'));
  catalog.models.push({
    id: 'test/image-tokens',
    type: 'image',
    context_length: 32000,
    input_modalities: ['text'],
    output_modalities: ['image'],
    supported_parameters: ['n', 'size', 'quality'],
    pricing: { input: '5.00', output: '40.00' },
    providers: [{ provider: 'sim', upstream_model: 'gpt-image-1' }],
  });
  const path = join(dir, 'catalog.yaml');
  writeFileSync(path, stringify(catalog));
  return path;
}

type Costed = OpenAI.ImagesResponse & { id: string; model: string; usage: OpenAI.ImagesResponse.Usage & { cost: number } };

/** Spec 4.8 (and spec 1, 7, 8) against a real gateway and its simulated upstream, through the openai SDK. */
describe('POST /v1/images/generations (spec 1, 4.8)', () => {
  let gw: StartedGateway;
  let client: OpenAI;
  let call: Call;

  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-e2e-'));
    ({ gw, client, call } = await startWithClient({ SVC_CATALOG: catalogWithTokenImageModel(dir) }, dir));
  }, 60_000);
  afterAll(() => stopGateway(gw));

  const key = () => gw.keys.live_api_key;
  const origin = () => gw.url.replace(/\/v1$/, '');
  const balance = async () => usdToNano((await call('GET', '/credits', { key: key() })).json.data.balance);
  const generation = async (id: string) => (await call('GET', `/generation?id=${id}`, { key: key() })).json.data;
  const generate = (body: unknown, headers: Record<string, string> = {}) => call('POST', '/images/generations', { key: key(), body, headers });
  const upstreamReceived = () => gw.runtime.simulator!.received.at(-1) as Record<string, unknown>;

  it("answers OpenAI's ImagesResponse with real PNGs of the requested size, billed per image: usage.cost is the balance drop and the generation record", async () => {
    const before = await balance();
    const { data, response } = await client.images.generate({ model: 'sim/image', prompt: 'a lighthouse at dusk', n: 2, size: '1024x1536' }).withResponse();
    const answer = data as Costed;
    expect(answer.id).toMatch(/^gen-[0-9a-f]{24}$/);
    expect(response.headers.get('x-svc-generation-id')).toBe(answer.id);
    expect(answer.model).toBe('sim/image');
    expect(answer.created).toBeGreaterThan(Date.now() / 1000 - 60);
    expect(answer.data).toHaveLength(2);
    const pngs = answer.data!.map((image) => {
      expect(Object.keys(image)).toEqual(['b64_json']);
      return Buffer.from(image.b64_json!, 'base64');
    });
    for (const png of pngs) expect(pngSize(png)).toEqual({ width: 1024, height: 1536 });
    expect(pngs[0].equals(pngs[1])).toBe(false);
    // The provider's usage as it reported it, with what the caller was charged.
    expect(answer.usage).toMatchObject({ input_tokens: expect.any(Number), output_tokens: 2 * 1584 });
    expect(usdToNano(answer.usage.cost)).toBe(2n * NANO_PER_IMAGE);
    expect(before - (await balance())).toBe(2n * NANO_PER_IMAGE);
    const record = await generation(answer.id);
    expect(record).toMatchObject({
      model: 'sim/image',
      provider: 'sim',
      endpoint: '/v1/images/generations',
      status: 'completed',
      usage_by_meter: { images: 2 },
    });
    expect(usdToNano(record.total_cost)).toBe(2n * NANO_PER_IMAGE);
    // Issue 23: the images at their price, adding up to the charge.
    expect(costLinesOf(record)).toEqual([['images', 2, 0.04, 2n * NANO_PER_IMAGE]]);
    // Asked under the route's upstream id, always for bytes.
    expect(upstreamReceived()).toEqual({ model: 'sim/image', prompt: 'a lighthouse at dusk', n: 2, size: '1024x1536', response_format: 'b64_json' });
  });

  describe('response_format url', () => {
    it('answers URLs to encrypted copies that GET serves without a key for an hour, as PNGs', async () => {
      const before = await balance();
      const r = await generate({ model: 'sim/image', prompt: 'a red fox', size: '64x48', response_format: 'url' });
      expect(r.status).toBe(200);
      expect(r.json.data).toHaveLength(1);
      const { url } = r.json.data[0];
      expect(Object.keys(r.json.data[0])).toEqual(['url']);
      const match = new RegExp(`^${origin()}/v1/images/content/([A-Za-z0-9_-]{43})\\.png$`).exec(url);
      expect(match).not.toBeNull();
      // The provider was still asked for bytes: the gateway serves its own copy.
      expect(upstreamReceived()).toMatchObject({ model: 'sim/image', response_format: 'b64_json' });
      expect(before - (await balance())).toBe(NANO_PER_IMAGE);

      const fetched = await fetch(url);
      expect(fetched.status).toBe(200);
      expect(fetched.headers.get('content-type')).toBe('image/png');
      expect(fetched.headers.get('cache-control')).toBe('private, max-age=3600');
      const png = Buffer.from(await fetched.arrayBuffer());
      expect(pngSize(png)).toEqual({ width: 64, height: 48 });

      // At rest: no PNG bytes, in the clear or in base64, only a ciphertext bound to its row.
      const { rows } = await gw.runtime.sql.query<{ account_id: string; content_type: string; sealed: string; created_at: Date; expires_at: Date }>(
        'SELECT account_id, content_type, sealed, created_at, expires_at FROM stored_images WHERE id = $1',
        [match![1]],
      );
      expect(rows).toHaveLength(1);
      const [row] = rows;
      expect(row).toMatchObject({ account_id: gw.keys.account_id, content_type: 'image/png' });
      expect(new Date(row.expires_at).getTime() - new Date(row.created_at).getTime()).toBe(STORED_IMAGE_TTL_MS);
      expect(Buffer.from(row.sealed, 'latin1').includes(PNG_SIGNATURE)).toBe(false);
      expect(row.sealed).not.toContain(png.toString('base64').slice(0, 16));
      for (const part of row.sealed.split(':')) expect(Buffer.from(part, 'base64').includes(PNG_SIGNATURE)).toBe(false);
      expect(openSecret(gw.runtime.config.encryptionKey!, row.sealed, imageSealContext(gw.keys.account_id, match![1]))).toBe(png.toString('base64'));
      expect(() => openSecret(gw.runtime.config.encryptionKey!, row.sealed, imageSealContext('acc_other', match![1]))).toThrow();
    });

    it('answers 404 in the error object for an id it never gave, and for an expired image, which it then deletes', async () => {
      for (const path of [`/images/content/${'A'.repeat(43)}.png`, '/images/content/guess.png', '/images/content/x']) {
        const r = await call('GET', path);
        expect(r.status).toBe(404);
        expect(r.json.error).toMatchObject({ type: 'not_found_error', code: 'image_not_found' });
      }
      // Kept two hours ago: its hour is over.
      const past = new StoredImages(gw.runtime.sql, () => gw.runtime.config.encryptionKey, new ManualClock(new Date(Date.now() - 2 * STORED_IMAGE_TTL_MS)));
      const [old] = await past.save(gw.keys.account_id, [PNG_SIGNATURE]);
      const count = async () => (await gw.runtime.sql.query('SELECT id FROM stored_images WHERE id = $1', [old.id])).rows.length;
      expect(await count()).toBe(1);
      const r = await call('GET', `/images/content/${old.id}.png`);
      expect(r.status).toBe(404);
      expect(r.json.error.code).toBe('image_not_found');
      expect(await count()).toBe(0);
    });

    it('clears expired images whenever new ones are kept', async () => {
      const past = new StoredImages(gw.runtime.sql, () => gw.runtime.config.encryptionKey, new ManualClock(new Date(Date.now() - 2 * STORED_IMAGE_TTL_MS)));
      const [old] = await past.save(gw.keys.account_id, [PNG_SIGNATURE]);
      const r = await generate({ model: 'sim/image', prompt: 'a new one', size: '8x8', response_format: 'url' });
      expect(r.status).toBe(200);
      expect((await gw.runtime.sql.query('SELECT id FROM stored_images WHERE id = $1', [old.id])).rows).toHaveLength(0);
    });

    it("builds the URL from the request's Host and x-forwarded-proto", async () => {
      const r = await generate({ model: 'sim/image', prompt: 'behind a proxy', size: '8x8', response_format: 'url', n: 2 }, { 'x-forwarded-proto': 'https' });
      expect(r.status).toBe(200);
      expect(r.json.data).toHaveLength(2);
      const host = new URL(gw.url).host;
      for (const image of r.json.data) expect(image.url).toMatch(new RegExp(`^https://${host}/v1/images/content/[A-Za-z0-9_-]{43}\\.png$`));
      expect(r.json.data[0].url).not.toBe(r.json.data[1].url);
    });

    it('without SVC_ENCRYPTION_KEY: 503 image_storage_unavailable before anything is held; b64_json still works', async () => {
      const config = gw.runtime.config as { encryptionKey: Buffer | null };
      const saved = config.encryptionKey;
      config.encryptionKey = null;
      try {
        const before = await balance();
        const refused = await generate({ model: 'sim/image', prompt: 'x', size: '8x8', response_format: 'url' });
        expect(refused.status).toBe(503);
        expect(refused.json.error).toMatchObject({ type: 'service_unavailable', code: 'image_storage_unavailable' });
        expect(refused.headers.get('x-svc-generation-id')).toBeNull();
        expect(await balance()).toBe(before);
        const inline = await generate({ model: 'sim/image', prompt: 'x', size: '8x8' });
        expect(inline.status).toBe(200);
        expect(before - (await balance())).toBe(NANO_PER_IMAGE);
      } finally {
        config.encryptionKey = saved;
      }
    });
  });

  it('falls back to sim-backup when sim fails provider-side, billed once', async () => {
    const before = await balance();
    const r = await generate({ model: 'sim/image', prompt: 'a boat\n#sim {"fail_models": {"sim/image": 503}}', size: '16x16' });
    expect(r.status).toBe(200);
    expect(r.json.model).toBe('sim/image');
    expect(r.json.data).toHaveLength(1);
    expect(upstreamReceived()).toMatchObject({ model: 'sim/image-backup' });
    const record = await generation(r.json.id);
    expect(record).toMatchObject({ provider: 'sim-backup', status: 'completed', usage_by_meter: { images: 1 } });
    expect(costLinesOf(record)).toEqual([['images', 1, 0.04, NANO_PER_IMAGE]]);
    expect(usdToNano(r.json.usage.cost)).toBe(NANO_PER_IMAGE);
    expect(before - (await balance())).toBe(NANO_PER_IMAGE);
  });

  it('spec 1 rule 3: an upstream failure, or an answer with no image, is not billed', async () => {
    const before = await balance();
    const failed = await generate({ model: 'sim/image', prompt: 'a boat\n#sim {"fail": 503}', size: '16x16' });
    expect(failed.status).toBe(503);
    expect(failed.json.error).toMatchObject({ type: 'service_unavailable' });
    const empty = await generate({ model: 'sim/image', prompt: 'a boat\n#sim {"empty": true}', size: '16x16', n: 3 });
    expect(empty.status).toBe(200);
    expect(empty.json.data).toEqual([]);
    expect(empty.json.usage.cost).toBe(0);
    expect(await balance()).toBe(before);
    expect(await generation(empty.json.id)).toMatchObject({ status: 'not_billed', total_cost: 0, usage_by_meter: {} });
    expect(await generation(failed.headers.get('x-svc-generation-id')!)).toMatchObject({ status: 'failed', total_cost: 0 });
  });

  it('spec 1 rule 1: a worst case the balance does not cover is refused with 402 and changes nothing', async () => {
    const { key: poorKey } = await createAccountWithKey(api(origin()), gw.keys.admin_token, 0.05);
    const credits = async () => (await call('GET', '/credits', { key: poorKey })).json.data;
    const before = await credits();
    const r = await call('POST', '/images/generations', { key: poorKey, body: { model: 'sim/image', prompt: 'two please', n: 2, size: '8x8' } });
    expect(r.status).toBe(402);
    expect(r.json.error).toMatchObject({ type: 'insufficient_quota' });
    expect(await credits()).toEqual(before);
    const one = await call('POST', '/images/generations', { key: poorKey, body: { model: 'sim/image', prompt: 'one then', size: '8x8' } });
    expect(one.status).toBe(200);
    expect(usdToNano((await credits()).balance)).toBe(usdToNano('0.05') - NANO_PER_IMAGE);
  });

  it.each([
    [{ model: 'sim/image', prompt: 'p', n: 5 }, 'n'],
    [{ model: 'sim/image', prompt: 'p', n: 0 }, 'n'],
    [{ model: 'sim/image', prompt: 'p', n: 1.5 }, 'n'],
    [{ model: 'sim/image', prompt: 'p', n: '2' }, 'n'],
    [{ model: 'sim/image', prompt: 'p', size: 'big' }, 'size'],
    [{ model: 'sim/image', prompt: 'p', size: '4097x1024' }, 'size'],
    [{ model: 'sim/image', prompt: 'p', size: '0x10' }, 'size'],
    [{ model: 'sim/image', prompt: 'p', quality: 'ultra' }, 'quality'],
    [{ model: 'sim/image', prompt: '' }, 'prompt'],
    [{ model: 'sim/image', prompt: '  \n ' }, 'prompt'],
    [{ model: 'sim/image', prompt: 7 }, 'prompt'],
    [{ model: 'sim/image' }, 'prompt'],
    [{ prompt: 'p' }, 'model'],
    [{ model: 'sim/image', prompt: 'p', response_format: 'gif' }, 'response_format'],
    [{ model: 'sim/image', prompt: 'p', image: ['x'] }, 'image[0]'],
    [{ model: 'sim/image', prompt: 'p', image: ['https://example.com/a.png', 'http://example.com/b.png'] }, 'image[1]'],
    [{ model: 'sim/image', prompt: 'p', image: ['data:image/png;base64,not base64!'] }, 'image[0]'],
    [{ model: 'sim/image', prompt: 'p', image: 'https://example.com/a.png' }, 'image'],
    [{ model: 'sim/image', prompt: 'p', image: Array.from({ length: 17 }, () => 'https://example.com/a.png') }, 'image'],
    [{ model: 'sim/image', prompt: 'p', user: 42 }, 'user'],
    [{ model: 'sim/image', prompt: 'p', provider: { sort: 'fastest' } }, 'provider.sort'],
    [{ model: 'sim/echo', prompt: 'p' }, 'model'],
  ])('refuses %j with a 400 naming %s, and bills nothing', async (body, param) => {
    const before = await balance();
    const r = await generate(body);
    expect(r.status).toBe(400);
    expect(r.json.error).toMatchObject({ type: 'invalid_request_error', param });
    expect(r.headers.get('x-svc-generation-id')).toBeNull();
    expect(await balance()).toBe(before);
  });

  it('forwards images to edit, as URLs it does not fetch, to a model with image input', async () => {
    const image = ['https://example.com/cat.png', 'data:image/png;base64,iVBORw0KGgo='];
    const r = await generate({ model: 'sim/image', prompt: 'the cat, in a hat', size: '8x8', image });
    expect(r.status).toBe(200);
    expect(upstreamReceived()).toMatchObject({ model: 'sim/image', image });
  });

  it('refuses images to edit for a model without image input: 400 unsupported_parameter, nothing held', async () => {
    const before = await balance();
    const r = await generate({ model: 'test/image-tokens', prompt: 'p', image: ['https://example.com/cat.png'] });
    expect(r.status).toBe(400);
    expect(r.json.error).toMatchObject({ type: 'invalid_request_error', param: 'image', code: 'unsupported_parameter' });
    expect(await balance()).toBe(before);
  });

  it('bills a model priced per token on the tokens the provider reports', async () => {
    const before = await balance();
    const r = await generate({ model: 'test/image-tokens', prompt: 'a quiet harbour at night', size: '32x32', quality: 'high' });
    expect(r.status).toBe(200);
    const { input_tokens: input, output_tokens: output } = r.json.usage;
    expect(input).toBeGreaterThan(0);
    // gpt-image-1 accounting in the simulator: 4,160 tokens per megapixel at high quality.
    expect(output).toBe(Math.ceil((4160 * 32 * 32) / (1024 * 1024)));
    const cost = BigInt(input) * NANO_PER_INPUT_TOKEN + BigInt(output) * NANO_PER_OUTPUT_TOKEN;
    expect(usdToNano(r.json.usage.cost)).toBe(cost);
    expect(before - (await balance())).toBe(cost);
    expect(await generation(r.json.id)).toMatchObject({ model: 'test/image-tokens', usage_by_meter: { input, output } });
  });

  it('ignores fields it does not know, names them in x-svc-ignored-params, and sends neither them nor provider upstream', async () => {
    const r = await generate({ model: 'sim/image', prompt: 'p', size: '8x8', style: 'vivid', 'odd,name': 1, user: 'end-user-7', provider: { only: ['sim'] } });
    expect(r.status).toBe(200);
    expect(r.headers.get('x-svc-ignored-params')).toBe('style,odd%2Cname');
    expect(upstreamReceived()).toEqual({ model: 'sim/image', prompt: 'p', n: 1, size: '8x8', user: 'end-user-7', response_format: 'b64_json' });
    expect(await generation(r.json.id)).toMatchObject({ provider: 'sim' });
    const plain = await generate({ model: 'sim/image', prompt: 'p', size: '8x8' });
    expect(plain.headers.get('x-svc-ignored-params')).toBeNull();
  });

  it('replays an Idempotency-Key without billing again', async () => {
    const body = { model: 'sim/image', prompt: 'once only', size: '8x8', n: 2 };
    const idempotency = { 'idempotency-key': `images-${Date.now()}` };
    const before = await balance();
    const first = await generate(body, idempotency);
    expect(first.status).toBe(200);
    const replay = await generate(body, idempotency);
    expect(replay.status).toBe(200);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.json).toEqual(first.json);
    expect(before - (await balance())).toBe(2n * NANO_PER_IMAGE);
  });
});

describe("image URLs expire an hour after they are made, by the gateway's clock, on PostgreSQL", () => {
  const clock = new ManualClock(new Date('2026-11-02T10:00:00Z'));
  let gw: StartedGateway;
  let call: Call;

  beforeAll(async () => {
    gw = await startGateway({ DATABASE_URL: await freshPgSchemaUrl('images') }, undefined, { clock });
    call = api(gw.url);
  }, 60_000);
  afterAll(() => stopGateway(gw));

  it('serves the image until its hour is over, then answers 404 and deletes it', async () => {
    const r = await call('POST', '/images/generations', {
      key: gw.keys.api_key,
      body: { model: 'sim/image', prompt: 'for an hour', size: '12x10', response_format: 'url' },
    });
    expect(r.status).toBe(200);
    const { url } = r.json.data[0];
    const id = /\/v1\/images\/content\/([A-Za-z0-9_-]{43})\.png$/.exec(url)![1];
    const rows = async () => (await gw.runtime.sql.query('SELECT id FROM stored_images WHERE id = $1', [id])).rows.length;

    clock.advance(STORED_IMAGE_TTL_MS - 1000);
    const fresh = await fetch(url);
    expect(fresh.status).toBe(200);
    expect(pngSize(Buffer.from(await fresh.arrayBuffer()))).toEqual({ width: 12, height: 10 });

    clock.advance(1000);
    const expired = await fetch(url);
    expect(expired.status).toBe(404);
    expect(((await expired.json()) as { error: unknown }).error).toMatchObject({ type: 'not_found_error', code: 'image_not_found' });
    expect(await rows()).toBe(0);
  });
});
