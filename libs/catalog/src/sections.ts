/**
 * The sections a model (and each of its routes) is made of in the catalog document: its prices
 * and costs, a video model's capabilities, a deprecation.
 */
import type { CatalogReader } from './reader';
import {
  ASPECT_RATIO,
  aspectRatioOfSize,
  type Deprecation,
  type Modality,
  type ModelPrices,
  type ModelType,
  parseVideoSize,
  type VideoCapabilities,
} from './types';

const PRICE_FIELDS = [
  'input',
  'output',
  'cached_input',
  'per_query',
  'per_second',
  'per_image',
  'per_million_characters',
  'per_search_unit',
  'audio_input',
  'cached_audio_input',
  'audio_output',
];
const DEPRECATION_FIELDS = ['sunset', 'replacement', 'announced'];
const VIDEO_FIELDS = ['durations', 'aspect_ratios', 'resolutions', 'sizes', 'image_to_video'];

/** A `pricing` or a `cost`: the same fields, the same units. */
export function parsePrices(r: CatalogReader, v: unknown, where: string): ModelPrices {
  const p = r.fields(v, where, PRICE_FIELDS);
  const perUnit = (key: string, unit: string) => (p[key] === undefined ? null : r.usd(p[key], `${where}.${key}`, unit));
  const perQuery = perUnit('per_query', 'per query');
  const perSecond = perUnit('per_second', 'per second');
  const perImage = perUnit('per_image', 'per image');
  const perMillionCharacters = perUnit('per_million_characters', 'per million characters');
  const perSearchUnit = perUnit('per_search_unit', 'per search unit');
  // A forgotten token price must not mean "free"; only a model billed per unit may leave them out.
  const billedPerUnit = [perQuery, perSecond, perImage, perMillionCharacters, perSearchUnit].some((price) => price !== null);
  const perToken = (key: string) =>
    p[key] !== undefined
      ? r.usd(p[key], `${where}.${key}`, 'per million tokens')
      : billedPerUnit
        ? 0n
        : r.fail(
            `${where}.${key}`,
            'required (write 0 for free), unless the model is priced per_query, per_second, per_image, per_million_characters or per_search_unit',
          );
  const inputPerM = perToken('input');
  const cachedInputPerM = p.cached_input === undefined ? inputPerM : r.usd(p.cached_input, `${where}.cached_input`, 'per million tokens');
  if (cachedInputPerM > inputPerM) r.fail(`${where}.cached_input`, 'must not exceed the input price');
  const audioInputPerM = perUnit('audio_input', 'per million audio tokens');
  const cachedAudioInputPerM =
    p.cached_audio_input === undefined ? audioInputPerM : r.usd(p.cached_audio_input, `${where}.cached_audio_input`, 'per million audio tokens');
  if (cachedAudioInputPerM !== null && audioInputPerM === null) r.fail(`${where}.cached_audio_input`, 'needs audio_input, the price it discounts');
  if (cachedAudioInputPerM !== null && audioInputPerM !== null && cachedAudioInputPerM > audioInputPerM)
    r.fail(`${where}.cached_audio_input`, 'must not exceed the audio_input price');
  return {
    inputPerM,
    outputPerM: perToken('output'),
    cachedInputPerM,
    perQuery,
    perSecond,
    perImage,
    perMillionCharacters,
    perSearchUnit,
    audioInputPerM,
    cachedAudioInputPerM,
    audioOutputPerM: perUnit('audio_output', 'per million audio tokens'),
  };
}

/**
 * Spec 1: video is billed per second; without the price a clip would be free. Spec 4.16: a
 * realtime model's audio tokens likewise.
 */
export function requirePricesOfType(r: CatalogReader, type: ModelType, p: ModelPrices, where: string): void {
  if (type === 'video' && p.perSecond === null) r.fail(`${where}.per_second`, 'required for video models (billed per second of clip)');
  if (type === 'realtime' && p.audioInputPerM === null)
    r.fail(`${where}.audio_input`, 'required for realtime models (billed per audio token, apart from text)');
  if (type === 'realtime' && p.audioOutputPerM === null)
    r.fail(`${where}.audio_output`, 'required for realtime models (billed per audio token, apart from text)');
}

export function parseVideo(r: CatalogReader, v: unknown, where: string, inputModalities: Modality[]): VideoCapabilities {
  const d = r.fields(v, where, VIDEO_FIELDS);
  // Required: a default clip length the file never stated would be a price the operator never saw.
  if (d.durations === undefined) r.fail(`${where}.durations`, 'required: the clip lengths in seconds, such as [4, 8, 12]');
  const durations = r.list(d.durations, `${where}.durations`, (x, w) =>
    Number.isInteger(x) && (x as number) > 0 ? (x as number) : r.fail(w, 'expected a positive whole number of seconds'),
  );
  if (durations.length === 0) r.fail(`${where}.durations`, 'expected at least one clip length');
  const aspectRatios = r.list(d.aspect_ratios ?? [], `${where}.aspect_ratios`, (x, w) =>
    typeof x === 'string' && ASPECT_RATIO.test(x) ? x : r.fail(w, `expected an aspect ratio such as "16:9", got ${JSON.stringify(x)}`),
  );
  const resolutions = r.list(d.resolutions ?? [], `${where}.resolutions`, (x, w) =>
    typeof x === 'string' && /^[A-Za-z0-9]{1,16}$/.test(x) ? x : r.fail(w, `expected a resolution label such as "720p", got ${JSON.stringify(x)}`),
  );
  const sizes = r.list(d.sizes ?? [], `${where}.sizes`, (x, w) => {
    if (typeof x !== 'string' || parseVideoSize(x) === null) return r.fail(w, `expected a size WxH such as "1280x720", got ${JSON.stringify(x)}`);
    // A listed size no request could be given (its ratio is not offered) is a mistake in the file.
    if (aspectRatioOfSize(x, aspectRatios) === null) r.fail(w, `${x} has none of the aspect ratios ${aspectRatios.join(', ')}`);
    return x;
  });
  // By default a model takes a first frame exactly when it takes images at all.
  const imageToVideo = d.image_to_video === undefined ? inputModalities.includes('image') : r.bool(d.image_to_video, `${where}.image_to_video`);
  if (imageToVideo && !inputModalities.includes('image')) r.fail(`${where}.image_to_video`, 'the model does not list image in input_modalities');
  return { durations: [...durations].sort((a, b) => a - b), aspectRatios, resolutions, sizes, imageToVideo };
}

export function parseDeprecation(r: CatalogReader, v: unknown, where: string): Deprecation {
  const d = r.fields(v, where, DEPRECATION_FIELDS);
  const sunset = r.date(d.sunset, `${where}.sunset`);
  // Required, null included: "no replacement" (410 after the sunset) must be a decision, not an omission.
  if (!('replacement' in d)) r.fail(`${where}.replacement`, 'required: the id of the model to use instead, or null');
  const replacement = d.replacement === null ? null : r.str(d.replacement, `${where}.replacement`);
  const announced = d.announced === undefined ? null : r.date(d.announced, `${where}.announced`);
  if (announced && announced > sunset) r.fail(`${where}.announced`, 'must not be after the sunset');
  return { sunset, replacement, announced };
}
