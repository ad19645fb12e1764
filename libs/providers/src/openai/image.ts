/** Spec 4.8: OpenAI's images answer as it is (`{created, data, usage?}`), or a ProviderError. */
import { isRecord } from '../json';
import { mapParameters } from '../operations';
import type { JsonResult, Operation } from '../provider';
import { invalidResponse } from '../transport';
import { postJson, type OpenAiConnection } from './connection';
import { OPENAI_PARAMETERS } from './parameters';

async function generate(upstream: OpenAiConnection, body: object, signal?: AbortSignal): Promise<JsonResult> {
  const { json, latencyMs } = await postJson(upstream, '/images/generations', mapParameters(OPENAI_PARAMETERS.image, body as Record<string, unknown>), signal);
  if (!isRecord(json) || !Array.isArray(json.data)) throw invalidResponse('images response without a data array', json);
  return { json, latencyMs };
}

export const image: Operation<'image', OpenAiConnection> = { parameters: OPENAI_PARAMETERS.image, calls: { image: generate } };
