import { usdToNano } from '@svc/platform';
import { costOfMeters } from '@svc/metering';
import { countTextTokens } from '@svc/providers';
import {
  audioTokensOfBase64,
  checkClientFrame,
  EMPTY_TALLY,
  MAX_APPEND_BASE64_CHARS,
  responseMeters,
  responseWorstCase,
  SESSION_IDLE_MS,
  SESSION_MAX_MS,
  sessionEnd,
  tallyClientEvent,
  tallyServerEvent,
  transcriptionModelOf,
  withTranscriptionModel,
} from './index';

const prices = { outputPerM: usdToNano('16'), audioOutputPerM: usdToNano('64') };

describe('session limits (spec 3.3, 8)', () => {
  const t0 = Date.parse('2026-11-07T12:00:00Z');
  it('go on while active and within the hour', () => {
    expect(sessionEnd(t0, t0, t0 + SESSION_IDLE_MS - 1)).toBeNull();
    expect(sessionEnd(t0, t0 + 50 * 60_000, t0 + SESSION_MAX_MS - 1)).toBeNull();
  });
  it('end after 10 idle minutes, and after 60 minutes however active', () => {
    expect(sessionEnd(t0, t0, t0 + SESSION_IDLE_MS)).toBe('session_idle_timeout');
    expect(sessionEnd(t0, t0 + SESSION_MAX_MS, t0 + SESSION_MAX_MS)).toBe('session_expired');
  });
});

describe('client frames (WIRE-FORMATS 3.2)', () => {
  it('accept a known event', () => {
    expect(checkClientFrame(JSON.stringify({ type: 'response.create', event_id: 'e1' }), false)).toEqual({
      ok: true,
      event: { type: 'response.create', event_id: 'e1' },
    });
  });
  it.each([
    ['binary', Buffer.from([1, 2]), true, 'invalid_json', null],
    ['malformed JSON', '{"type":', false, 'invalid_json', null],
    ['an array', '[1]', false, 'invalid_json', null],
    ['no type', '{"event_id":"e2"}', false, 'missing_required_parameter', 'e2'],
    ['unknown type', '{"type":"response.explode","event_id":"e3"}', false, 'invalid_value', 'e3'],
    ['append without audio', '{"type":"input_audio_buffer.append","event_id":"e4"}', false, 'invalid_type', 'e4'],
  ])('refuse %s, echoing event_id', (_what, data, binary, code, eventId) => {
    const checked = checkClientFrame(data as string, binary as boolean);
    expect(checked).toMatchObject({ ok: false, error: { type: 'invalid_request_error', code, event_id: eventId } });
  });
  it('refuse an append over 15 MiB of base64, not one at the limit', () => {
    const at = JSON.stringify({ type: 'input_audio_buffer.append', audio: 'A'.repeat(MAX_APPEND_BASE64_CHARS) });
    expect(checkClientFrame(at, false).ok).toBe(true);
    const over = JSON.stringify({ type: 'input_audio_buffer.append', event_id: 'big', audio: 'A'.repeat(MAX_APPEND_BASE64_CHARS + 4) });
    expect(checkClientFrame(over, false)).toMatchObject({ ok: false, error: { code: 'audio_too_large', param: 'audio', event_id: 'big' } });
  });
});

describe('transcription model (spec 4.16)', () => {
  const update = (transcription: unknown) => ({
    type: 'session.update',
    event_id: 'u1',
    session: { type: 'realtime', audio: { input: { format: { type: 'audio/pcm' }, transcription } } },
  });
  it('takes one of the three ids, null, or nothing', () => {
    expect(transcriptionModelOf(update({ model: 'sim/transcribe' }))).toEqual({ model: 'sim/transcribe' });
    expect(transcriptionModelOf(update(null))).toEqual({ model: null });
    expect(transcriptionModelOf({ type: 'session.update', session: { type: 'realtime' } })).toEqual({ model: undefined });
  });
  it('refuses another model', () => {
    expect(transcriptionModelOf(update({ model: 'whisper-1' }))).toMatchObject({
      error: { code: 'invalid_value', param: 'session.audio.input.transcription.model', event_id: 'u1' },
    });
  });
  it('rewrites the model, keeping the rest', () => {
    const event = update({ model: 'sim/transcribe', language: 'en' });
    const rewritten = withTranscriptionModel(event, 'gpt-4o-transcribe') as any;
    expect(rewritten.session.audio.input).toEqual({ format: { type: 'audio/pcm' }, transcription: { model: 'gpt-4o-transcribe', language: 'en' } });
    expect((event.session.audio.input.transcription as any).model).toBe('sim/transcribe');
  });
});

describe('worst case of a response (spec 1 rule 1)', () => {
  it('counts audio at 1 token per 100 ms of 24 kHz PCM16, rounded up', () => {
    expect(audioTokensOfBase64(Buffer.alloc(4800).toString('base64'))).toBe(1);
    expect(audioTokensOfBase64(Buffer.alloc(4801).toString('base64'))).toBe(2);
    expect(audioTokensOfBase64('')).toBe(0);
  });

  it('holds 4,096 output tokens at the dearer output price when no cap is set, and the conversation so far', () => {
    let tally = tallyServerEvent(EMPTY_TALLY, { type: 'session.created', session: { instructions: 'Be brief.', max_output_tokens: 'inf' } });
    tally = tallyClientEvent(tally, {
      type: 'conversation.item.create',
      item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Hello there' }] },
    });
    tally = tallyClientEvent(tally, { type: 'input_audio_buffer.append', audio: Buffer.alloc(48_000).toString('base64') });
    expect(responseWorstCase(tally, { type: 'response.create' }, prices)).toEqual({
      input: countTextTokens('Be brief.') + countTextTokens('Hello there'),
      audio_input: 10,
      audio_output: 4096,
    });
  });

  it("takes the response's cap, else the session's, and the text price when it is the dearer", () => {
    const tally = tallyClientEvent(EMPTY_TALLY, { type: 'session.update', session: { type: 'realtime', max_output_tokens: 300 } });
    expect(responseWorstCase(tally, { type: 'response.create' }, prices).audio_output).toBe(300);
    expect(responseWorstCase(tally, { type: 'response.create', response: { max_output_tokens: 50 } }, prices).audio_output).toBe(50);
    expect(responseWorstCase(tally, { type: 'response.create' }, { outputPerM: 10n, audioOutputPerM: null })).toMatchObject({ output: 300 });
  });

  it('adds what an earlier response read and wrote, from its usage', () => {
    let tally = tallyServerEvent(EMPTY_TALLY, { type: 'session.created', session: { instructions: 'x' } });
    const instructions = tally.instructionsText;
    const usage = {
      input_tokens: 30,
      output_tokens: 25,
      input_token_details: { text_tokens: 20, audio_tokens: 10, cached_tokens: 0, cached_tokens_details: { text_tokens: 0, audio_tokens: 0 } },
      output_token_details: { text_tokens: 5, audio_tokens: 20 },
    };
    tally = tallyServerEvent(tally, { type: 'response.done', response: { usage } });
    expect(responseWorstCase(tally, { type: 'response.create' }, prices)).toMatchObject({ input: 20 + 5, audio_input: 10 + 20 });
    expect(tally.text + instructions).toBe(25);
  });

  it('bounds what the simulated model charges for a turn: cost of the hold >= cost of the usage', () => {
    const realtimePrices = {
      inputPerM: usdToNano('4'),
      cachedInputPerM: usdToNano('0.4'),
      outputPerM: usdToNano('16'),
      audioInputPerM: usdToNano('32'),
      cachedAudioInputPerM: usdToNano('0.4'),
      audioOutputPerM: usdToNano('64'),
    } as any;
    const tally = tallyClientEvent(EMPTY_TALLY, {
      type: 'conversation.item.create',
      item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Say something' }] },
    });
    const held = costOfMeters(responseWorstCase(tally, { type: 'response.create', response: { max_output_tokens: 40 } }, realtimePrices), realtimePrices);
    const used = costOfMeters({ input: countTextTokens('Say something'), output: 8, audio_output: 32 }, realtimePrices);
    expect(held).toBeGreaterThanOrEqual(used);
  });
});

describe('usage as meters', () => {
  it('splits text and audio, cached of each, and returns every output token', () => {
    const usage = {
      total_tokens: 100,
      input_tokens: 60,
      output_tokens: 40,
      input_token_details: {
        text_tokens: 35,
        audio_tokens: 25,
        image_tokens: 0,
        cached_tokens: 15,
        cached_tokens_details: { text_tokens: 10, audio_tokens: 5, image_tokens: 0 },
      },
      output_token_details: { text_tokens: 8, audio_tokens: 32 },
    };
    expect(responseMeters(usage)).toEqual({
      usage: { input: 35, cached_input: 10, audio_input: 25, cached_audio_input: 5, output: 8, audio_output: 32 },
      returned: 40,
    });
  });
  it('reads usage without details as text, and none as null', () => {
    expect(responseMeters({ input_tokens: 7, output_tokens: 0 })).toEqual({
      usage: { input: 7, cached_input: 0, audio_input: 0, cached_audio_input: 0, output: 0, audio_output: 0 },
      returned: 0,
    });
    expect(responseMeters(null)).toBeNull();
  });
});
