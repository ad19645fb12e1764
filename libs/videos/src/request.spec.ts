import { loadCatalog, type CatalogModel, type VideoCapabilities } from '@svc/catalog';
import type { ApiError } from '@svc/platform';
import { errorOf } from '@svc/platform/testing/errors';
import { estimatedCostNano, MAX_VIDEO_PROMPT_CHARACTERS, validateVideoRequest } from './request';

const catalog = loadCatalog();
const sim = catalog.get('sim/video')!;
/** sim/video with other capabilities. */
const withCaps = (caps: Partial<VideoCapabilities>): CatalogModel => ({ ...sim, video: { ...sim.video!, ...caps } });
const body = (fields: Record<string, unknown> = {}) => ({ model: 'sim/video', prompt: 'A cat surfing at dawn', ...fields });

/** The error object a request is refused with, as the edge answers it. */
const refusal = (raw: unknown, model: CatalogModel = sim): ApiError => errorOf(() => validateVideoRequest(raw, model));
const refusedAt = (raw: unknown, model: CatalogModel = sim) => {
  const err = refusal(raw, model);
  expect(err).toMatchObject({ status: 400, type: 'invalid_request_error' });
  return err.param;
};

describe('video create request (spec 4.15)', () => {
  it("fills in the model's defaults: the shortest clip, the first aspect ratio and resolution", () => {
    expect(validateVideoRequest(body(), sim)).toEqual({
      model: 'sim/video',
      prompt: 'A cat surfing at dawn',
      seconds: 4,
      aspectRatio: '16:9',
      resolution: '720p',
      size: null,
      exactSize: null,
      imageUrl: null,
    });
    // Defaults follow the model, not constants.
    expect(validateVideoRequest(body(), withCaps({ durations: [6, 10], aspectRatios: ['9:16'], resolutions: ['1080p'] }))).toMatchObject({
      seconds: 6,
      aspectRatio: '9:16',
      resolution: '1080p',
    });
    expect(validateVideoRequest(body(), withCaps({ aspectRatios: [], resolutions: [] }))).toMatchObject({ aspectRatio: null, resolution: null, size: null });
  });

  it("takes seconds as a number or a numeric string, among the model's durations", () => {
    expect(validateVideoRequest(body({ seconds: 8 }), sim).seconds).toBe(8);
    expect(validateVideoRequest(body({ seconds: '12' }), sim).seconds).toBe(12);
    expect(validateVideoRequest(body({ seconds: null }), sim).seconds).toBe(4);
    for (const seconds of [5, '5', 4.5, '4.5', '', 'eight', true, [4], -4, '1e1']) expect(refusedAt(body({ seconds }))).toBe('seconds');
    expect(refusal(body({ seconds: 5 })).message).toBe('This model makes clips of 4, 8, 12 seconds, not 5.');
  });

  it('requires a prompt of 1 to 32000 characters', () => {
    expect(refusedAt({ model: 'sim/video' })).toBe('prompt');
    for (const prompt of ['', '   ', 42, null, ['a']]) expect(refusedAt(body({ prompt }))).toBe('prompt');
    expect(validateVideoRequest(body({ prompt: 'x'.repeat(MAX_VIDEO_PROMPT_CHARACTERS) }), sim).prompt).toHaveLength(32_000);
    expect(refusedAt(body({ prompt: 'x'.repeat(MAX_VIDEO_PROMPT_CHARACTERS + 1) }))).toBe('prompt');
    // Counted in characters: 32000 emoji are 64000 UTF-16 units and still fit.
    expect(validateVideoRequest(body({ prompt: '🎬'.repeat(MAX_VIDEO_PROMPT_CHARACTERS) }), sim).prompt).toHaveLength(64_000);
  });

  it('refuses a body that is not an object, and a model that is not a video model', () => {
    expect(refusal('prompt').param).toBeNull();
    expect(refusal(null).status).toBe(400);
    expect(refusedAt(body(), catalog.get('sim/echo')!)).toBe('model');
    // A rule of the request, not an HTTP answer: the edge gives it its status.
    expect(() => validateVideoRequest(body({ seconds: 5 }), sim)).toThrow(expect.objectContaining({ kind: 'invalid', param: 'seconds' }));
  });

  it("takes an aspect ratio and a resolution among the model's", () => {
    expect(validateVideoRequest(body({ aspect_ratio: '9:16', resolution: '1080p' }), sim)).toMatchObject({
      aspectRatio: '9:16',
      resolution: '1080p',
      size: null,
    });
    expect(refusedAt(body({ aspect_ratio: '1:1' }))).toBe('aspect_ratio');
    expect(refusedAt(body({ aspect_ratio: 16 / 9 }))).toBe('aspect_ratio');
    expect(refusedAt(body({ resolution: '4k' }))).toBe('resolution');
    expect(refusedAt(body({ resolution: 720 }))).toBe('resolution');
    expect(refusedAt(body({ aspect_ratio: '16:9' }), withCaps({ aspectRatios: [] }))).toBe('aspect_ratio');
    expect(refusedAt(body({ resolution: '720p' }), withCaps({ resolutions: [] }))).toBe('resolution');
  });

  it("maps a size WxH to the model's aspect ratio and resolution; never together with aspect_ratio", () => {
    expect(validateVideoRequest(body({ size: '720x1280' }), sim)).toMatchObject({ aspectRatio: '9:16', resolution: '720p', size: '720x1280' });
    // Sent to the provider as 16:9 at 1080p, which each adapter turns into a size its provider takes.
    expect(validateVideoRequest(body({ size: '1920x1080' }), sim)).toMatchObject({
      aspectRatio: '16:9',
      resolution: '1080p',
      size: '1920x1080',
      exactSize: null,
    });
    // OpenAI's 1024x1792 is 9:16 near enough; the model has no 1024p label.
    expect(validateVideoRequest(body({ size: '1024x1792' }), sim)).toMatchObject({ aspectRatio: '9:16', resolution: null, size: '1024x1792' });
    expect(validateVideoRequest(body({ size: '1280x720', resolution: '720p' }), sim)).toMatchObject({ resolution: '720p' });
    expect(refusedAt(body({ size: '1280x720', resolution: '1080p' }))).toBe('resolution');
    expect(refusedAt(body({ size: '1280x720', aspect_ratio: '16:9' }))).toBe('size');
    expect(refusedAt(body({ size: '1000x1000' }))).toBe('size');
    for (const size of ['1280X720', '1280x', 'x720', '0x720', '1280 x 720', 1280]) expect(refusedAt(body({ size }))).toBe('size');
  });

  it("holds a size to the model's list when it has one, and refuses it from a model without shapes", () => {
    const listed = withCaps({ sizes: ['1280x720', '720x1280'] });
    // One of the model's own sizes goes to the provider as it is.
    expect(validateVideoRequest(body({ size: '1280x720' }), listed)).toMatchObject({ size: '1280x720', exactSize: '1280x720' });
    expect(refusedAt(body({ size: '1920x1080' }), listed)).toBe('size');
    expect(refusedAt(body({ size: '1280x720' }), withCaps({ aspectRatios: [], sizes: [] }))).toBe('size');
    // Sizes listed without ratios: the size's own ratio.
    expect(validateVideoRequest(body({ size: '1280x720' }), withCaps({ aspectRatios: [], sizes: ['1280x720'] })).aspectRatio).toBe('16:9');
  });

  it('takes a public https image_url as the first frame, from image-to-video models only', () => {
    expect(validateVideoRequest(body({ image_url: 'https://cdn.example.com/frame.png?sig=abc' }), sim).imageUrl).toBe(
      'https://cdn.example.com/frame.png?sig=abc',
    );
    for (const image_url of [
      'http://cdn.example.com/frame.png',
      'https://user:pass@cdn.example.com/frame.png',
      'https://127.0.0.1/frame.png',
      'https://169.254.169.254/latest/meta-data',
      'https://[::1]/frame.png',
      'https://10.0.0.7/frame.png',
      'https://2130706433/frame.png',
      'data:image/png;base64,iVBORw0KGgo=',
      'file:///etc/passwd',
      'frame.png',
      42,
    ]) {
      expect(refusedAt(body({ image_url }))).toBe('image_url');
    }
    expect(refusal(body({ image_url: 'https://127.0.0.1/f.png' })).message).toContain('127.0.0.1 is a private address (loopback)');
    expect(refusedAt(body({ image_url: 'https://cdn.example.com/frame.png' }), withCaps({ imageToVideo: false }))).toBe('image_url');
    expect(validateVideoRequest(body({ image_url: 'http://127.0.0.1:9/f.png' }), sim, { allowPrivateUrls: true }).imageUrl).toBe('http://127.0.0.1:9/f.png');
  });

  it("refuses OpenAI's input_reference rather than ignoring the first frame", () => {
    expect(refusedAt(body({ input_reference: { image_url: 'https://cdn.example.com/frame.png' } }))).toBe('input_reference');
  });

  it('estimates seconds times the per-second price, exactly', () => {
    expect(estimatedCostNano(8, sim)).toBe(800_000_000n);
    expect(estimatedCostNano(12, sim)).toBe(1_200_000_000n);
    const thirdOfACent = { ...sim, prices: { ...sim.prices, perSecond: 3_333_333n } };
    expect(estimatedCostNano(12, thirdOfACent)).toBe(39_999_996n);
    expect(estimatedCostNano(4, sim, { ...sim.prices, perSecond: 250_000_000n })).toBe(1_000_000_000n);
    expect(() => estimatedCostNano(4.5, sim)).toThrow(RangeError);
    expect(() => estimatedCostNano(4, { ...sim, prices: { ...sim.prices, perSecond: null } })).toThrow('has no per-second price');
  });
});
