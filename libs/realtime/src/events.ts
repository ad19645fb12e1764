/**
 * The client events of the GA realtime protocol (WIRE-FORMATS 3.2) as the gateway checks them
 * before relaying: a frame the upstream would refuse anyway, or that the gateway cannot bill
 * (an unknown event type could make the model work outside a held response), is answered here
 * with an `error` event and never forwarded.
 */
import { isRecord } from '@svc/providers';

export type Wire = Record<string, unknown>;

/** WIRE-FORMATS 3.2: every client event type of the GA protocol. */
export const CLIENT_EVENT_TYPES: ReadonlySet<string> = new Set([
  'session.update',
  'input_audio_buffer.append',
  'input_audio_buffer.commit',
  'input_audio_buffer.clear',
  'output_audio_buffer.clear',
  'conversation.item.create',
  'conversation.item.retrieve',
  'conversation.item.truncate',
  'conversation.item.delete',
  'response.create',
  'response.cancel',
]);

/** WIRE-FORMATS 3.2: `input_audio_buffer.append` carries at most 15 MiB of base64 audio. */
export const MAX_APPEND_BASE64_CHARS = 15 * 1024 * 1024;

/**
 * Spec 4.16: "Input transcription supports three fixed transcription model ids": the catalog's
 * ids a session may name in `audio.input.transcription.model`.
 */
export const TRANSCRIPTION_MODELS: readonly string[] = ['sim/whisper', 'sim/transcribe', 'sim/transcribe-mini'];

/** The error event's `error` (WIRE-FORMATS 3.3): `event_id` echoes the offending client event's. */
export interface ClientEventProblem {
  type: 'invalid_request_error';
  code: string;
  message: string;
  param: string | null;
  event_id: string | null;
}

export type Checked = { ok: true; event: Wire & { type: string } } | { ok: false; error: ClientEventProblem };

const problem = (code: string, message: string, param: string | null, eventId: unknown): Checked => ({
  ok: false,
  error: { type: 'invalid_request_error', code, message, param, event_id: typeof eventId === 'string' ? eventId : null },
});

/** One frame from the client: a JSON object of a known type, within the protocol's size rules. */
export function checkClientFrame(data: Buffer | string, isBinary: boolean): Checked {
  if (isBinary) return problem('invalid_json', 'Binary frames are not events: send each event as a JSON text frame.', null, null);
  let event: unknown;
  try {
    event = JSON.parse(typeof data === 'string' ? data : data.toString('utf8'));
  } catch {
    return problem('invalid_json', 'The event is not valid JSON.', null, null);
  }
  if (!isRecord(event)) return problem('invalid_json', 'An event must be a JSON object.', null, null);
  const eventId = event.event_id;
  if (typeof event.type !== 'string') return problem('missing_required_parameter', "Missing required parameter: 'type'.", 'type', eventId);
  if (!CLIENT_EVENT_TYPES.has(event.type))
    return problem('invalid_value', `Invalid value: ${JSON.stringify(event.type)} is not a client event type.`, 'type', eventId);
  if (event.type === 'input_audio_buffer.append') {
    if (typeof event.audio !== 'string') return problem('invalid_type', 'audio must be a base64 string.', 'audio', eventId);
    if (event.audio.length > MAX_APPEND_BASE64_CHARS) {
      return problem(
        'audio_too_large',
        `An input_audio_buffer.append event carries at most ${MAX_APPEND_BASE64_CHARS} characters of base64 audio (15 MiB); split it into several.`,
        'audio',
        eventId,
      );
    }
  }
  return { ok: true, event: event as Wire & { type: string } };
}

/**
 * A `session.update`'s transcription model (`session.audio.input.transcription.model`): absent
 * (the session's stays), null (transcription off), a permitted catalog id, or a problem.
 */
export function transcriptionModelOf(
  event: Wire,
  allowed: readonly string[] = TRANSCRIPTION_MODELS,
): { model: string | null | undefined } | { error: ClientEventProblem } {
  const session = isRecord(event.session) ? event.session : undefined;
  const audio = session && isRecord(session.audio) ? session.audio : undefined;
  const input = audio && isRecord(audio.input) ? audio.input : undefined;
  if (!input || !('transcription' in input)) return { model: undefined };
  const transcription = input.transcription;
  if (transcription === null) return { model: null };
  const param = 'session.audio.input.transcription.model';
  if (!isRecord(transcription) || typeof transcription.model !== 'string' || !allowed.includes(transcription.model)) {
    const given = isRecord(transcription) ? JSON.stringify(transcription.model) : 'none';
    const { error } = problem(
      'invalid_value',
      `Input transcription takes one of ${allowed.map((m) => `'${m}'`).join(', ')} (spec 4.16); got ${given}.`,
      param,
      event.event_id,
    ) as { error: ClientEventProblem };
    return { error };
  }
  return { model: transcription.model };
}

/** `event` with its transcription model replaced by `upstreamModel` (the catalog route's id), leaving the client's object untouched. */
export function withTranscriptionModel(event: Wire, upstreamModel: string): Wire {
  const session = event.session as Wire;
  const audio = session.audio as Wire;
  const input = audio.input as Wire;
  return {
    ...event,
    session: { ...session, audio: { ...audio, input: { ...input, transcription: { ...(input.transcription as Wire), model: upstreamModel } } } },
  };
}
