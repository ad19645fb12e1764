/**
 * Adapter for any upstream that speaks the OpenAI wire format (OpenAI, OpenRouter, vLLM, Ollama,
 * llama.cpp, the simulator). It forwards a body that the gateway has already validated and mapped
 * to the upstream's model id, and turns every failure into a ProviderError that says whether a
 * retry or a fallback model makes sense.
 */
import { FormData } from 'undici';
import { isRecord } from '../json';
import { mapParameters, type ParameterConfig } from '../operations';
import {
  excludesReasoning,
  normalizeUsage,
  type AudioForm,
  type BinaryResult,
  type ChatCompletionResult,
  type ChatProvider,
  type EmbeddingsResult,
  type JsonResult,
  type VideoJob,
  type VideoJobRequest,
  type VideoVariant,
  type RealtimeConnection,
} from '../provider';
import { ProviderError } from '../provider-error';
import { readSse } from '../sse';
import {
  binaryOf,
  Deadline,
  DEFAULT_TIMEOUT_MS,
  getBinaryUpstream,
  invalidResponse,
  parseJson,
  postJsonUpstream,
  postUpstream,
  sendJsonUpstream,
  type UpstreamBody,
} from '../transport';
import { givenFields, videoJobFrom } from '../video';
import type { ChatChunk, ChatCompletion, EmbeddingsResponse } from '../wire';
import { OPENAI_PARAMETERS } from './parameters';

export interface OpenAiCompatibleOptions {
  /** Including the version prefix, e.g. `https://api.openai.com/v1`. */
  baseUrl: string;
  apiKey: string;
  /**
   * Non-streamed: the whole call. Streamed: the wait for the response headers, then for each
   * piece of the stream (an idle timeout, so a long generation is not cut). Default 120 s.
   */
  timeoutMs?: number;
  /** Sent with every request, e.g. OpenRouter's `HTTP-Referer` and `X-Title`. */
  headers?: Record<string, string>;
  /** Which chat fields the upstream takes: OpenAI's own, or a router's (see the catalog). */
  dialect?: 'openai' | 'router';
}

/** The answer without its thinking, for a caller who excluded it. */
function withoutReasoning<T extends { reasoning?: unknown; reasoning_details?: unknown }>(message: T | undefined): T | undefined {
  if (!message) return message;
  const { reasoning: _text, reasoning_details: _details, ...rest } = message;
  return rest as T;
}

export class OpenAiCompatibleAdapter implements ChatProvider {
  private readonly baseUrl: string;
  private readonly headers: Record<string, string>;
  private readonly timeoutMs: number;
  private readonly chatParams: ParameterConfig<'chat'>;

  constructor(options: OpenAiCompatibleOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.headers = {
      ...options.headers,
      authorization: `Bearer ${options.apiKey}`,
      'content-type': 'application/json',
    };
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.chatParams = OPENAI_PARAMETERS.chat[options.dialect ?? 'openai'];
  }

  /** WIRE-FORMATS 3.1: the base URL's scheme as a WebSocket's (https -> wss), `/realtime?model=`, the same bearer key. */
  realtimeConnection(model: string): RealtimeConnection {
    const url = new URL(`${this.baseUrl}/realtime`);
    url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
    url.searchParams.set('model', model);
    return { url: url.href, headers: { authorization: this.headers.authorization } };
  }

  async chatCompletion(body: object, signal?: AbortSignal): Promise<ChatCompletionResult> {
    const { json, latencyMs } = await this.postJson('/chat/completions', this.payload(body), signal);
    if (!isRecord(json) || !Array.isArray(json.choices)) {
      throw invalidResponse('chat completion without a choices array', json);
    }
    const response = json as ChatCompletion;
    if (excludesReasoning(body as Record<string, unknown>)) {
      response.choices = response.choices.map((choice) => ({ ...choice, message: withoutReasoning(choice.message)! }));
    }
    return { response, usage: normalizeUsage(json.usage), latencyMs };
  }

  /**
   * Yields every chunk, the trailing usage chunk (empty `choices`) included: usage is always
   * requested, because billing needs it whether or not the client asked. Ends normally only
   * after `[DONE]`; a stream cut short throws a `network` ProviderError after the chunks that
   * did arrive, so callers can tell it from a clean finish.
   */
  async *streamChatCompletion(body: object, signal?: AbortSignal): AsyncGenerator<ChatChunk> {
    const requested = (body as { stream_options?: unknown }).stream_options;
    const payload = {
      ...this.payload(body),
      stream: true,
      stream_options: { ...(isRecord(requested) ? requested : {}), include_usage: true },
    };
    const exclude = excludesReasoning(body as Record<string, unknown>);
    const deadline = new Deadline(this.timeoutMs, signal);
    try {
      const stream = await this.post('/chat/completions', payload, deadline, 'text/event-stream');
      // Leaving this loop early (return, throw) ends the body's iterator, which destroys the body.
      for await (const event of readSse(
        deadline.whileReading(stream),
        deadline.streamEnd((e) => e.data === '[DONE]'),
      )) {
        if (event.data === '[DONE]') return;
        const chunk = parseJson(event.data);
        // OpenAI and OpenRouter report a failure after the headers as an error event.
        if (isRecord(chunk) && isRecord(chunk.error)) throw streamedError(chunk);
        if (exclude && isRecord(chunk) && Array.isArray(chunk.choices)) {
          const choices = (chunk as ChatChunk).choices.map((choice) => ({ ...choice, delta: withoutReasoning(choice.delta)! }));
          // A chunk that only carried thinking is nothing once the thinking is gone: not sent as
          // an empty `delta: {}` (issue 15.8). Its usage, if any, still counts.
          const empty = choices.length > 0 && choices.every((c) => c.finish_reason == null && Object.keys(c.delta ?? {}).length === 0);
          if (empty && !isRecord((chunk as ChatChunk).usage)) continue;
          (chunk as ChatChunk).choices = empty ? [] : choices;
        }
        yield chunk as ChatChunk;
      }
      throw new ProviderError({ kind: 'network', status: 502, message: 'upstream stream ended before [DONE]' });
    } catch (error) {
      throw deadline.failure(error);
    } finally {
      deadline.dispose();
    }
  }

  /** The request as this upstream takes it: its own fields only, reasoning in its own terms. */
  private payload(body: object): Record<string, unknown> {
    return mapParameters(this.chatParams, body as Record<string, unknown>);
  }

  async embeddings(body: object, signal?: AbortSignal): Promise<EmbeddingsResult> {
    const { json, latencyMs } = await this.postJson('/embeddings', mapParameters(OPENAI_PARAMETERS.embed, body as Record<string, unknown>), signal);
    if (!isRecord(json) || !Array.isArray(json.data)) {
      throw invalidResponse('embeddings response without a data array', json);
    }
    return { response: json as EmbeddingsResponse, usage: normalizeUsage(json.usage), latencyMs };
  }

  /**
   * Spec 4.13: OpenAI's moderation answer as it is (`{id, model, results}`), or a
   * ProviderError. Free for the caller, but it goes through the pipeline like every call.
   */
  async moderations(body: object, signal?: AbortSignal): Promise<JsonResult> {
    const { json, latencyMs } = await this.postJson('/moderations', mapParameters(OPENAI_PARAMETERS.moderation, body as Record<string, unknown>), signal);
    if (!isRecord(json) || !Array.isArray(json.results)) throw invalidResponse('moderation response without a results array', json);
    return { json, latencyMs };
  }

  /** Spec 4.8: OpenAI's images answer as it is (`{created, data, usage?}`), or a ProviderError. */
  async images(body: object, signal?: AbortSignal): Promise<JsonResult> {
    const { json, latencyMs } = await this.postJson('/images/generations', mapParameters(OPENAI_PARAMETERS.image, body as Record<string, unknown>), signal);
    if (!isRecord(json) || !Array.isArray(json.data)) throw invalidResponse('images response without a data array', json);
    return { json, latencyMs };
  }

  /** Spec 4.9: the audio bytes as the provider sent them, with their content type. */
  async speech(body: object, signal?: AbortSignal): Promise<BinaryResult> {
    const started = performance.now();
    const deadline = new Deadline(this.timeoutMs, signal);
    try {
      return await binaryOf(
        await this.post('/audio/speech', mapParameters(OPENAI_PARAMETERS.speech, body as Record<string, unknown>), deadline, 'application/octet-stream'),
        started,
      );
    } catch (error) {
      throw deadline.failure(error);
    } finally {
      deadline.dispose();
    }
  }

  /**
   * Spec 4.10: one audio file and its fields as a multipart form to `/audio/transcriptions` or
   * `/audio/translations`; the answer's body and content type as they came (JSON or text).
   */
  async transcribe(kind: 'transcriptions' | 'translations', form: AudioForm, signal?: AbortSignal): Promise<BinaryResult> {
    const started = performance.now();
    const deadline = new Deadline(this.timeoutMs, signal);
    try {
      const data = new FormData();
      const takes = OPENAI_PARAMETERS[kind === 'transcriptions' ? 'transcription' : 'translation'] as Readonly<Record<string, unknown>>;
      for (const [name, value] of [...Object.entries(form.fields), ...(form.lists ?? [])]) if (takes[name] !== undefined) data.append(name, value);
      data.append('file', new Blob([form.file], { type: form.contentType }), form.filename);
      const { 'content-type': _json, ...headers } = this.headers;
      const answer = await postUpstream(`${this.baseUrl}/audio/${kind}`, { ...headers, accept: 'application/json, text/plain' }, data, deadline);
      const bytes = Buffer.from(await answer.arrayBuffer());
      return { bytes, contentType: answer.contentType ?? 'application/json', latencyMs: performance.now() - started };
    } catch (error) {
      throw deadline.failure(error);
    } finally {
      deadline.dispose();
    }
  }

  /**
   * Spec 4.15 on OpenAI's Videos API (WIRE-FORMATS 2): `POST /videos` as JSON, the answer's
   * Video object as a VideoJob. OpenAI reports no cost (costNano null) and no URL.
   */
  async createVideo(body: VideoJobRequest, signal?: AbortSignal): Promise<VideoJob> {
    const payload = mapParameters(OPENAI_PARAMETERS.video, givenFields(body));
    const { json, headers } = await sendJsonUpstream('POST', `${this.baseUrl}/videos`, this.headers, payload, this.timeoutMs, signal);
    return openAiVideoJob(json, headers);
  }

  async getVideo(id: string, signal?: AbortSignal): Promise<VideoJob> {
    const { json, headers } = await sendJsonUpstream('GET', this.videoUrl(id), this.headers, undefined, this.timeoutMs, signal);
    return openAiVideoJob(json, headers);
  }

  /**
   * OpenAI has no cancel: DELETE /videos/{id} is the nearest, and it removes the video as well
   * (WIRE-FORMATS 2 says OpenAI deletes only finished ones; an upstream that refuses to delete a
   * running job makes this a ProviderError). A 404 means it is already gone, which is what a
   * repeated cancel finds: not an error.
   */
  async cancelVideo(id: string, signal?: AbortSignal): Promise<void> {
    try {
      await sendJsonUpstream('DELETE', this.videoUrl(id), this.headers, undefined, this.timeoutMs, signal);
    } catch (error) {
      if (error instanceof ProviderError && error.kind === 'http' && error.status === 404) return;
      throw error;
    }
  }

  /** `GET /videos/{id}/content?variant=`; OpenAI's SDK asks with `Accept: application/binary`. */
  async videoContent(id: string, variant: VideoVariant, signal?: AbortSignal): Promise<BinaryResult> {
    const { 'content-type': _json, ...headers } = this.headers;
    return getBinaryUpstream(`${this.videoUrl(id)}/content?variant=${variant}`, { ...headers, accept: 'application/binary' }, this.timeoutMs, signal);
  }

  private videoUrl(id: string): string {
    return `${this.baseUrl}/videos/${encodeURIComponent(id)}`;
  }

  private postJson(path: string, payload: object, signal: AbortSignal | undefined) {
    return postJsonUpstream(this.baseUrl + path, this.headers, payload, this.timeoutMs, signal);
  }

  private post(path: string, payload: object, deadline: Deadline, accept: string): Promise<UpstreamBody & { contentType?: string }> {
    return postUpstream(this.baseUrl + path, { ...this.headers, accept }, payload, deadline);
  }
}

/**
 * The name the gateway already uses. As a value it is the class (`new OpenAiCompatibleProvider`);
 * as a type it is the ChatProvider shape, so code typed with it also takes other adapters.
 */
export const OpenAiCompatibleProvider = OpenAiCompatibleAdapter;
export type OpenAiCompatibleProvider = ChatProvider;

/** OpenAI's Video object: `{id, object: "video", status, progress, error: {code, message} | null, ...}`. */
function openAiVideoJob(json: unknown, headers: Parameters<typeof videoJobFrom>[1]): VideoJob {
  return videoJobFrom(json, headers, 'OpenAI', () => ({}));
}

function streamedError(chunk: Record<string, unknown>): ProviderError {
  const error = chunk.error as Record<string, unknown>;
  const code = error.code;
  const status = typeof code === 'number' && code >= 400 && code <= 599 ? code : 502;
  const message = typeof error.message === 'string' ? error.message : 'upstream reported an error mid-stream';
  return new ProviderError({ kind: 'http', status, message, upstreamBody: chunk });
}
