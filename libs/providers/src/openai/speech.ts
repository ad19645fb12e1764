/** Spec 4.9: the audio bytes as the provider sent them, with their content type. */
import { mapParameters } from '../operations';
import type { BinaryResult, Operation } from '../provider';
import { binaryOf, Deadline } from '../transport';
import { post, type OpenAiConnection } from './connection';
import { OPENAI_PARAMETERS } from './parameters';

async function say(upstream: OpenAiConnection, body: object, signal?: AbortSignal): Promise<BinaryResult> {
  const started = performance.now();
  const deadline = new Deadline(upstream.timeoutMs, signal);
  try {
    const payload = mapParameters(OPENAI_PARAMETERS.speech, body as Record<string, unknown>);
    return await binaryOf(await post(upstream, '/audio/speech', payload, deadline, 'application/octet-stream'), started);
  } catch (error) {
    throw deadline.failure(error);
  } finally {
    deadline.dispose();
  }
}

export const speech: Operation<'speech', OpenAiConnection> = { parameters: OPENAI_PARAMETERS.speech, calls: { speech: say } };
