/**
 * Spec 4.13: OpenAI's moderation answer as it is (`{id, model, results}`), or a ProviderError.
 * Free for the caller, but it goes through the pipeline like every call.
 */
import { isRecord } from '../json';
import { mapParameters } from '../operations';
import type { JsonResult, Operation } from '../provider';
import { invalidResponse } from '../transport';
import { postJson, type OpenAiConnection } from './connection';
import { OPENAI_PARAMETERS } from './parameters';

async function moderations(upstream: OpenAiConnection, body: object, signal?: AbortSignal): Promise<JsonResult> {
  const { json, latencyMs } = await postJson(upstream, '/moderations', mapParameters(OPENAI_PARAMETERS.moderation, body as Record<string, unknown>), signal);
  if (!isRecord(json) || !Array.isArray(json.results)) throw invalidResponse('moderation response without a results array', json);
  return { json, latencyMs };
}

export const moderation: Operation<'moderation', OpenAiConnection> = { parameters: OPENAI_PARAMETERS.moderation, calls: { moderation: moderations } };
