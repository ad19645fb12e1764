/** A transcription's reported usage as meters (WIRE-FORMATS 3.3, 4.3): HTTP transcriptions and realtime input transcription. */
import { transcriptionMeters } from './transcriptions';

const audioPriced = { audioInputPerM: 6_000_000_000n };
const textPriced = { audioInputPerM: null };
const tokens = (input: number, audio: number | undefined, output: number) => ({
  type: 'tokens',
  input_tokens: input,
  output_tokens: output,
  total_tokens: input + output,
  ...(audio === undefined ? {} : { input_token_details: { text_tokens: input - audio, audio_tokens: audio } }),
});

describe('transcriptionMeters', () => {
  it('bills the audio tokens apart when the model has an audio input price, the rest of the input as text', () => {
    expect(transcriptionMeters(tokens(30, 20, 7), audioPriced)).toEqual({ input: 10, audio_input: 20, output: 7 });
  });

  it('bills every input token at the input price when the model has no audio price: audio is never free', () => {
    expect(transcriptionMeters(tokens(30, 20, 7), textPriced)).toEqual({ input: 30, output: 7 });
    expect(transcriptionMeters(tokens(30, undefined, 7), audioPriced)).toEqual({ input: 30, output: 7 });
  });

  it('never counts more audio tokens than input tokens', () => {
    expect(transcriptionMeters({ ...tokens(5, 0, 1), input_token_details: { audio_tokens: 99 } }, audioPriced)).toEqual({
      input: 0,
      audio_input: 5,
      output: 1,
    });
  });

  it('takes a duration as whole seconds, rounded up', () => {
    expect(transcriptionMeters({ type: 'duration', seconds: 6.2 }, audioPriced)).toEqual({ seconds: 7 });
  });

  it('is null for anything else', () => {
    for (const usage of [null, undefined, 'tokens', { type: 'tokens', input_tokens: 3 }, { type: 'duration' }, { type: 'other', seconds: 3 }]) {
      expect(transcriptionMeters(usage, audioPriced)).toBeNull();
    }
  });
});
