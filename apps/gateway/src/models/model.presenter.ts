import type { CatalogModel, ModelPrices, VideoCapabilities } from '@svc/catalog';
import { deprecationAt } from '@svc/catalog';
import { nanoToUsdString, type Nano } from '@svc/platform';

/**
 * A model as GET /v1/models shows it: OpenAI's model object (`id`, `object`, `created`,
 * `owned_by`) plus the catalog facts of spec 2.8, in OpenRouter's field names where it has them.
 */
export function presentModel(model: CatalogModel, now: Date) {
  const deprecation = deprecationAt(model, now);
  return {
    id: model.id,
    object: 'model' as const,
    created: model.created,
    owned_by: model.ownedBy,
    name: model.name,
    type: model.type,
    context_length: model.contextLength,
    architecture: { input_modalities: model.inputModalities, output_modalities: model.outputModalities },
    supported_parameters: model.supportedParameters,
    pricing: presentPrices(model.prices),
    deprecated: deprecation !== null,
    sunset: deprecation?.sunset.toISOString() ?? null,
    replacement: deprecation?.replacement ?? null,
    uptime: model.uptime,
    // Speech models: the voices POST /v1/audio/speech accepts (spec 4.9).
    ...(model.voices.length > 0 ? { voices: model.voices } : {}),
    // Video models: what POST /videos may ask for (spec 4.15: "GET /models?type=video lists
    // durations, ratios and price per second"; the price is `pricing.second`). An empty list
    // means the request may not set that field.
    ...(model.video !== null ? { video: presentVideo(model.video) } : {}),
  };
}

function presentVideo(video: VideoCapabilities) {
  return {
    durations: video.durations,
    aspect_ratios: video.aspectRatios,
    resolutions: video.resolutions,
    sizes: video.sizes,
    image_to_video: video.imageToVideo,
  };
}

/**
 * One model with the providers that serve it (issue 15.5: `no_provider_available` points here),
 * in the catalog's preference order: what each bills, its quantization and data policy. Uptime
 * is the catalog's figure for the model; per provider it is not known (null).
 */
export function presentModelWithProviders(model: CatalogModel, now: Date) {
  return {
    ...presentModel(model, now),
    providers: model.providers.map((route) => ({
      name: route.provider.name,
      context_length: model.contextLength,
      pricing: presentPrices(route.prices),
      quantization: route.quantization,
      supports_tools: route.tools,
      data_collection: route.dataCollection,
      zdr: route.zdr,
      uptime: null,
    })),
  };
}

/**
 * USD as exact decimal strings, as OpenRouter does: token prices per token (`prompt`,
 * `completion`, `input_cache_read`), the others per unit and only where the model has them
 * (`request` per query, `image` per image, `second` per second, `character` per character of
 * speech input, `search_unit` per rerank search unit, `audio_input`, `audio_input_cache_read` and
 * `audio_output` per audio token).
 */
export function presentPrices(prices: ModelPrices): Record<string, string> {
  return {
    prompt: perToken(prices.inputPerM),
    completion: perToken(prices.outputPerM),
    input_cache_read: perToken(prices.cachedInputPerM),
    ...(prices.perQuery !== null ? { request: nanoToUsdString(prices.perQuery) } : {}),
    ...(prices.perImage !== null ? { image: nanoToUsdString(prices.perImage) } : {}),
    ...(prices.perSecond !== null ? { second: nanoToUsdString(prices.perSecond) } : {}),
    ...(prices.perMillionCharacters !== null ? { character: perToken(prices.perMillionCharacters) } : {}),
    ...(prices.perSearchUnit !== null ? { search_unit: nanoToUsdString(prices.perSearchUnit) } : {}),
    // Realtime (spec 4.16): audio tokens, per token like the text ones.
    ...(prices.audioInputPerM !== null ? { audio_input: perToken(prices.audioInputPerM) } : {}),
    ...(prices.cachedAudioInputPerM !== null ? { audio_input_cache_read: perToken(prices.cachedAudioInputPerM) } : {}),
    ...(prices.audioOutputPerM !== null ? { audio_output: perToken(prices.audioOutputPerM) } : {}),
  };
}

/** Nano-USD per million tokens is exactly USD per token with 15 decimals: shift, never divide. */
export function perToken(nanoPerMillion: Nano): string {
  const digits = nanoPerMillion.toString().padStart(16, '0');
  const fraction = digits.slice(-15).replace(/0+$/, '');
  return `${BigInt(digits.slice(0, -15))}${fraction ? `.${fraction}` : ''}`;
}
