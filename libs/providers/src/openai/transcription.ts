/**
 * Spec 4.10: one audio file and its fields as a multipart form to `/audio/transcriptions` or
 * `/audio/translations`; the answer's body and content type as they came (JSON or text). The two
 * differ only in their path and the fields they take.
 */
import { FormData } from 'undici';
import type { AudioForm, BinaryResult, Operation } from '../provider';
import { Deadline, postUpstream } from '../transport';
import { withoutJsonBody, type OpenAiConnection } from './connection';
import { OPENAI_PARAMETERS } from './parameters';

async function transcribe(upstream: OpenAiConnection, kind: 'transcription' | 'translation', form: AudioForm, signal?: AbortSignal): Promise<BinaryResult> {
  const started = performance.now();
  const deadline = new Deadline(upstream.timeoutMs, signal);
  try {
    const data = new FormData();
    const takes = OPENAI_PARAMETERS[kind] as Readonly<Record<string, unknown>>;
    for (const [name, value] of [...Object.entries(form.fields), ...(form.lists ?? [])]) if (takes[name] !== undefined) data.append(name, value);
    data.append('file', new Blob([form.file], { type: form.contentType }), form.filename);
    const headers = { ...withoutJsonBody(upstream), accept: 'application/json, text/plain' };
    const answer = await postUpstream(`${upstream.baseUrl}/audio/${kind}s`, headers, data, deadline);
    const bytes = Buffer.from(await answer.arrayBuffer());
    return { bytes, contentType: answer.contentType ?? 'application/json', latencyMs: performance.now() - started };
  } catch (error) {
    throw deadline.failure(error);
  } finally {
    deadline.dispose();
  }
}

export const transcription: Operation<'transcription', OpenAiConnection> = {
  parameters: OPENAI_PARAMETERS.transcription,
  calls: { transcription: (upstream, form, signal) => transcribe(upstream, 'transcription', form, signal) },
};

export const translation: Operation<'translation', OpenAiConnection> = {
  parameters: OPENAI_PARAMETERS.translation,
  calls: { translation: (upstream, form, signal) => transcribe(upstream, 'translation', form, signal) },
};
