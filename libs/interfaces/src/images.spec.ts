import { loadCatalog } from '@svc/catalog';
import { costOfMeters } from '@svc/metering';
import { type ApiError, refusalOf } from '@svc/platform';
import { countTextTokens } from '@svc/providers';
import {
  checkImageInput,
  imagesAnswer,
  imagesOf,
  imagesOperation,
  imagesRequest,
  imageUsage,
  MAX_IMAGE_OUTPUT_TOKENS,
  providerCostOf,
  type ImagesCall,
} from './images';

const refusal = (body: unknown): ApiError => {
  try {
    imagesRequest(body);
  } catch (err) {
    const mapped = refusalOf(err);
    if (mapped) return mapped;
    throw err;
  }
  throw new Error('accepted');
};

const call = (fields: object = {}): ImagesCall => imagesRequest({ model: 'sim/image', prompt: 'a fox', ...fields });

describe('imagesRequest (spec 4.8, 8)', () => {
  it('defaults to one image in b64_json, the provider deciding size and quality', () => {
    expect(imagesRequest({ model: 'm', prompt: 'a red fox' })).toEqual({
      model: 'm',
      prompt: 'a red fox',
      n: 1,
      size: null,
      quality: null,
      responseFormat: 'b64_json',
      images: [],
      user: null,
      provider: undefined,
      ignored: [],
      promptTokens: countTextTokens('a red fox'),
    });
  });

  it('takes every field spec 4.8 lists, null as absent, and names the rest as ignored', () => {
    const image = ['https://example.com/a.png', 'data:image/webp;base64,UklGRg=='];
    const parsed = imagesRequest({
      model: 'm',
      prompt: 'p',
      n: 4,
      size: '4096x1',
      quality: 'hd',
      response_format: 'url',
      image,
      user: 'u',
      provider: { only: ['x'] },
      style: 'vivid',
      background: 'transparent',
    });
    expect(parsed).toMatchObject({
      n: 4,
      size: '4096x1',
      quality: 'hd',
      responseFormat: 'url',
      images: image,
      user: 'u',
      provider: { only: ['x'] },
      ignored: ['style', 'background'],
    });
    expect(imagesRequest({ model: 'm', prompt: 'p', n: null, size: null, quality: null, response_format: null, image: null, user: null })).toMatchObject({
      n: 1,
      size: null,
      responseFormat: 'b64_json',
      images: [],
    });
    expect(imagesRequest({ model: 'm', prompt: 'p', size: 'auto' }).size).toBe('auto');
    expect(imagesRequest({ model: 'm', prompt: 'p', image: [] }).images).toEqual([]);
  });

  it.each([
    [{ n: 5 }, 'n'],
    [{ n: 0 }, 'n'],
    [{ n: 1.5 }, 'n'],
    [{ n: -1 }, 'n'],
    [{ size: '1024' }, 'size'],
    [{ size: '1024x0' }, 'size'],
    [{ size: '01x10' }, 'size'],
    [{ size: '10x4097' }, 'size'],
    [{ size: ' 10x10' }, 'size'],
    [{ size: 1024 }, 'size'],
    [{ quality: 'HD' }, 'quality'],
    [{ response_format: 'png' }, 'response_format'],
    [{ image: {} }, 'image'],
    [{ image: [42] }, 'image[0]'],
    [{ image: ['ftp://example.com/a.png'] }, 'image[0]'],
    [{ image: ['data:text/plain;base64,aGk='] }, 'image[0]'],
    [{ image: ['data:image/png;base64,'] }, 'image[0]'],
    [{ user: ['u'] }, 'user'],
  ])('%j: refused naming %s', (fields, param) => {
    expect(refusal({ model: 'm', prompt: 'p', ...fields })).toMatchObject({ status: 400, param });
  });

  it('needs a model and a prompt with something in it', () => {
    expect(refusal({ prompt: 'p' }).param).toBe('model');
    expect(refusal({ model: 'm', prompt: '\t ' }).param).toBe('prompt');
    expect(refusal({ model: 'm', prompt: ['p'] }).param).toBe('prompt');
    expect(refusal([{ model: 'm', prompt: 'p' }]).status).toBe(400);
  });
});

describe('checkImageInput (spec 7: unsupported_parameter)', () => {
  const catalog = loadCatalog();
  const multimodal = catalog.get('sim/image')!;
  const textOnly = { ...multimodal, id: 'text/only', inputModalities: ['text'] } as typeof multimodal;

  it('lets images through only to a model with image input, and a request without images anywhere', () => {
    const edit = call({ image: ['https://example.com/a.png'] });
    expect(() => checkImageInput(edit, multimodal)).not.toThrow();
    expect(() => checkImageInput(call(), textOnly)).not.toThrow();
    expect(() => checkImageInput(edit, textOnly)).toThrow(expect.objectContaining({ kind: 'invalid', param: 'image', code: 'unsupported_parameter' }));
  });
});

describe('the images operation: hold and charge (spec 1 rules 1 and 3)', () => {
  const catalog = loadCatalog();
  const perImage = catalog.get('sim/image')!.providers[0].prices;
  const perToken = catalog.get('sim/echo')!.providers[0].prices;
  const operation = imagesOperation();

  it('holds n images at a price per image, and the prompt plus n of the largest images at prices per token', () => {
    const three = call({ n: 3 });
    const worst = operation.worstCase(three);
    expect(worst).toEqual({ images: 3, input: three.promptTokens, output: 3 * MAX_IMAGE_OUTPUT_TOKENS });
    expect(costOfMeters(worst, perImage)).toBe(3n * 40_000_000n);
    expect(costOfMeters(worst, perToken)).toBe(costOfMeters({ input: three.promptTokens, output: 3 * 6240 }, perToken));
    expect(operation.endpoint).toBe('/v1/images/generations');
    expect(operation.modelType).toBe('image');
  });

  const answered = (upstream: object, count = 2) => ({
    upstream: upstream as Record<string, unknown>,
    data: Array.from({ length: count }, () => ({ b64_json: 'AAAA' })),
  });

  it('bills images where the model is priced per image, whatever else the provider reports', () => {
    expect(imageUsage(answered({ usage: { cost: 9, input_tokens: 5, output_tokens: 7 } }), call(), 40_000_000n)).toEqual({ images: 2 });
    expect(imageUsage(answered({}, 0), call(), 0n)).toEqual({ images: 0 });
  });

  it("otherwise the provider's usage.cost, exact to the nano, else its tokens (the prompt as counted when it reports none)", () => {
    expect(imageUsage(answered({ usage: { cost: 0.0123, input_tokens: 5, output_tokens: 7 } }), call(), null)).toEqual({ provider_cost: 12_300_000 });
    expect(imageUsage(answered({ usage: { cost: '0.04' } }), call(), null)).toEqual({ provider_cost: 40_000_000 });
    expect(imageUsage(answered({ usage: { cost: -1, input_tokens: 5, output_tokens: 7 } }), call(), null)).toEqual({ input: 5, output: 7 });
    expect(imageUsage(answered({ usage: { input_tokens: 5, output_tokens: 7 } }), call(), null)).toEqual({ input: 5, output: 7 });
    const c = call();
    expect(imageUsage(answered({}), c, null)).toEqual({ input: c.promptTokens, output: 0 });
  });

  it.each([
    [0.04, 40_000_000n],
    ['0.000000001', 1n],
    [1e-7, 100n],
    ['0.0000000001', 1n],
    [0.0000123456789, 12_346n],
    ['1.0000000010', 1_000_000_001n],
    [0, 0n],
    [-0.5, null],
    ['abc', null],
    [Number.NaN, null],
    [null, null],
    [true, null],
  ])('usage.cost %j is %s nano-USD', (cost, nano) => {
    expect(providerCostOf(cost)).toBe(nano);
  });

  it('counts only images with bytes, at most n: neither an empty one nor an extra one is billed', async () => {
    const png = Buffer.from('89504e470d0a1a0a', 'hex').toString('base64');
    const upstream = { data: [{ b64_json: '' }, { b64_json: png, revised_prompt: 'r' }, {}, { url: 'https://cdn.example/x.png' }, { b64_json: png }] };
    const two = await imagesOf(upstream, call({ n: 2 }), undefined);
    expect(two).toEqual([{ b64_json: png, revised_prompt: 'r' }, { url: 'https://cdn.example/x.png' }]);
    expect(operation.returned({ upstream, data: two })).toBe(2);
    expect(await imagesOf({ data: [] }, call(), undefined)).toEqual([]);
  });

  it('keeps the bytes of images answered by URL, in order, and fails without a place to keep them', async () => {
    const a = Buffer.from('first').toString('base64');
    const b = Buffer.from('second').toString('base64');
    const kept: string[] = [];
    const keep = async (images: Buffer[]) =>
      images.map((bytes) => (kept.push(bytes.toString()), `https://gw.example/v1/images/content/${bytes.toString()}.png`));
    const urls = await imagesOf({ data: [{ b64_json: a }, { b64_json: b }] }, call({ n: 2, response_format: 'url' }), keep);
    expect(urls).toEqual([{ url: 'https://gw.example/v1/images/content/first.png' }, { url: 'https://gw.example/v1/images/content/second.png' }]);
    expect(kept).toEqual(['first', 'second']);
    await expect(imagesOf({ data: [{ b64_json: a }] }, call({ response_format: 'url' }), undefined)).rejects.toThrow();
  });
});

describe('imagesAnswer (spec 1 rule 2)', () => {
  it("is OpenAI's ImagesResponse with the service's id and model, the provider's echo and usage, and the cost charged", () => {
    const upstream = {
      created: 1,
      data: [],
      size: '8x8',
      quality: 'medium',
      output_format: 'png',
      extra: 'x',
      usage: { input_tokens: 3, output_tokens: 9, total_tokens: 12, cost: 0.5 },
    };
    const data = [{ b64_json: 'AAAA' }];
    expect(imagesAnswer('gen-1', 'sim/image', 1700000000, { upstream, data }, 0.04)).toEqual({
      id: 'gen-1',
      created: 1700000000,
      model: 'sim/image',
      data,
      size: '8x8',
      quality: 'medium',
      output_format: 'png',
      usage: { input_tokens: 3, output_tokens: 9, total_tokens: 12, cost: 0.04 },
    });
    expect(imagesAnswer('gen-2', 'm', 1, { upstream: { data: [] }, data: [] }, 0).usage).toEqual({ cost: 0 });
  });
});
