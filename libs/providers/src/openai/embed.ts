/** Spec 4.7: `POST /embeddings`. */
import { isRecord } from '../json';
import { mapParameters } from '../operations';
import { normalizeUsage, type EmbeddingsResult, type Operation } from '../provider';
import { invalidResponse } from '../transport';
import type { EmbeddingsResponse } from '../wire';
import { postJson, type OpenAiConnection } from './connection';
import { OPENAI_PARAMETERS } from './parameters';

async function embeddings(upstream: OpenAiConnection, body: object, signal?: AbortSignal): Promise<EmbeddingsResult> {
  const { json, latencyMs } = await postJson(upstream, '/embeddings', mapParameters(OPENAI_PARAMETERS.embed, body as Record<string, unknown>), signal);
  if (!isRecord(json) || !Array.isArray(json.data)) {
    throw invalidResponse('embeddings response without a data array', json);
  }
  return { response: json as EmbeddingsResponse, usage: normalizeUsage(json.usage), latencyMs };
}

export const embed: Operation<'embed', OpenAiConnection> = { parameters: OPENAI_PARAMETERS.embed, calls: { embed: embeddings } };
