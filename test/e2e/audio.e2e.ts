import OpenAI, { toFile } from 'openai';
import { usdToNano } from '@svc/platform';
import { parseWav, tone, wav } from '@svc/providers';
import { api, createAccountWithKey, startWithClient, stopGateway, type Call, type StartedGateway } from '../support/gateway';
import { costLinesOf } from '../support/cost-lines';

// The built-in catalog: sim/tts $15 per million characters = 15,000 nano a character; sim/whisper $0.0001 a second.
const NANO_PER_CHARACTER = 15_000n;
const NANO_PER_SECOND = 100_000n;

/** A real WAV of `seconds` with a `#sim-text` line the simulated model transcribes. */
const recording = (seconds: number, text: string) => Buffer.concat([wav(tone(24_000 * seconds)), Buffer.from(`\n#sim-text ${text}\n`)]);

/**
 * Issue 16: speech (spec 4.9) and transcriptions and translations (spec 4.10) through the
 * metering pipeline, with the official openai SDK and the real simulated upstream.
 */
describe('POST /v1/audio/speech, /transcriptions, /translations (issue 16; spec 1, 4.9, 4.10, 8)', () => {
  let gw: StartedGateway;
  let client: OpenAI;
  let call: Call;

  beforeAll(async () => {
    ({ gw, call } = await startWithClient());
    client = new OpenAI({ baseURL: gw.url, apiKey: gw.keys.live_api_key, maxRetries: 0 });
  }, 60_000);
  afterAll(() => stopGateway(gw));

  const key = () => gw.keys.live_api_key;
  const balance = async () => usdToNano((await call('GET', '/credits', { key: key() })).json.data.balance);
  const generation = async (id: string) => (await call('GET', `/generation?id=${id}`, { key: key() })).json.data;
  const speech = (body: unknown, headers: Record<string, string> = {}) =>
    fetch(`${gw.url}/audio/speech`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key()}`, 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    });

  describe('speech', () => {
    it('answers playable WAV through the SDK, billed per character: the cost header equals the balance drop and the generation', async () => {
      const input = 'Hello from the gateway.';
      const before = await balance();
      const { data, response } = await client.audio.speech.create({ model: 'sim/tts', voice: 'nova', input, response_format: 'wav' }).withResponse();
      const audio = Buffer.from(await data.arrayBuffer());
      const info = parseWav(audio);
      expect(info).not.toBeNull();
      expect(info!.seconds).toBeGreaterThan(0.5);
      expect(response.headers.get('content-type')).toMatch(/^audio\/wav/);
      const id = response.headers.get('x-svc-generation-id')!;
      expect(id).toMatch(/^gen-/);
      const cost = BigInt(input.length) * NANO_PER_CHARACTER;
      expect(usdToNano(response.headers.get('x-svc-cost')!)).toBe(cost);
      expect(before - (await balance())).toBe(cost);
      const record = await generation(id);
      expect(record).toMatchObject({ model: 'sim/tts', endpoint: '/v1/audio/speech', status: 'completed', usage_by_meter: { characters: input.length } });
      expect(usdToNano(record.total_cost)).toBe(cost);
      // Issue 23: the characters at $15 / M.
      expect(costLinesOf(record)).toEqual([['characters', input.length, 0.000015, cost]]);
    });

    it("answers MP3 by default (audio/mpeg, frame sync), with the model's first voice when none is named", async () => {
      const r = await speech({ model: 'sim/tts', input: 'Default format.' });
      expect(r.status).toBe(200);
      expect(r.headers.get('content-type')).toMatch(/^audio\/mpeg/);
      const bytes = Buffer.from(await r.arrayBuffer());
      expect(bytes[0]).toBe(0xff);
      expect(bytes[1] & 0xe0).toBe(0xe0);
    });

    it('replays the same bytes from the response cache without billing, under a cached generation of its own', async () => {
      const body = { model: 'sim/tts', voice: 'alloy', input: `Cached speech ${Date.now()}`, response_format: 'wav' };
      const miss = await speech(body, { 'x-svc-cache': 'true' });
      const missBytes = Buffer.from(await miss.arrayBuffer());
      expect(miss.headers.get('x-svc-cache-status')).toBe('MISS');
      const before = await balance();
      const hit = await speech(body, { 'x-svc-cache': 'true' });
      expect(hit.headers.get('x-svc-cache-status')).toBe('HIT');
      expect(Buffer.from(await hit.arrayBuffer()).equals(missBytes)).toBe(true);
      expect(hit.headers.get('x-svc-cost')).toBe('0');
      expect(await balance()).toBe(before);
      expect(await generation(hit.headers.get('x-svc-generation-id')!)).toMatchObject({
        status: 'cached',
        cache_source_id: miss.headers.get('x-svc-generation-id'),
      });
    });

    it('replays an Idempotency-Key with the same bytes, billed once', async () => {
      const body = { model: 'sim/tts', voice: 'echo', input: 'Once only.', response_format: 'pcm' };
      const headers = { 'idempotency-key': `speech-${Date.now()}` };
      const before = await balance();
      const first = Buffer.from(await (await speech(body, headers)).arrayBuffer());
      const again = await speech(body, headers);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(Buffer.from(await again.arrayBuffer()).equals(first)).toBe(true);
      expect(before - (await balance())).toBe(BigInt('Once only.'.length) * NANO_PER_CHARACTER);
    });

    it('spec 1 rule 3: a provider failure and an answer without audio are not billed', async () => {
      const before = await balance();
      const failed = await speech({ model: 'sim/tts', input: 'x\n#sim {"fail": 503}', response_format: 'wav' });
      expect(failed.status).toBe(503);
      expect(((await failed.json()) as { error: unknown }).error).toMatchObject({ message: expect.any(String) });
      const empty = await speech({ model: 'sim/tts', input: 'x\n#sim {"empty": true}', response_format: 'wav' });
      expect(empty.status).toBe(200);
      expect(parseWav(Buffer.from(await empty.arrayBuffer()))!.dataBytes).toBe(0);
      expect(empty.headers.get('x-svc-cost')).toBe('0');
      expect(await balance()).toBe(before);
      expect(await generation(empty.headers.get('x-svc-generation-id')!)).toMatchObject({ status: 'not_billed', total_cost: 0 });
    });

    it.each([
      ['{ model: sim/tts, input: hi, voice: bogus }', { model: 'sim/tts', input: 'hi', voice: 'bogus' }, 'voice'],
      ['{ model: sim/tts, input: hi, voice: 7 }', { model: 'sim/tts', input: 'hi', voice: 7 }, 'voice'],
      ['{ model: sim/tts, input: hi, response_format: ogg }', { model: 'sim/tts', input: 'hi', response_format: 'ogg' }, 'response_format'],
      ['4,097 characters of input', { model: 'sim/tts', input: 'x'.repeat(4097) }, 'input'],
      ['{ model: sim/tts, input:  }', { model: 'sim/tts', input: '' }, 'input'],
      ['{ model: sim/tts, input: hi, speed: 5 }', { model: 'sim/tts', input: 'hi', speed: 5 }, 'speed'],
      ['{ model: sim/tts, input: hi, stream_format: sse }', { model: 'sim/tts', input: 'hi', stream_format: 'sse' }, 'stream_format'],
      ['{ model: sim/whisper, input: hi }', { model: 'sim/whisper', input: 'hi' }, 'model'],
      ['{ model: sim/echo, input: hi }', { model: 'sim/echo', input: 'hi' }, 'model'],
      ['{ input: hi }', { input: 'hi' }, 'model'],
    ])('refuses %s with a 400 naming %s, and bills nothing', async (_label, body, param) => {
      const before = await balance();
      const r = await speech(body);
      expect(r.status).toBe(400);
      expect(((await r.json()) as { error: unknown }).error).toMatchObject({ type: 'invalid_request_error', param });
      expect(await balance()).toBe(before);
    });

    it('spec 1 rule 1: a worst case the balance does not cover is 402 and changes nothing', async () => {
      const { key: poor } = await createAccountWithKey(api(gw.url.replace(/\/v1$/, '')), gw.keys.admin_token, 0.00001);
      const credits = async () => (await call('GET', '/credits', { key: poor })).json.data;
      const before = await credits();
      // 4,096 characters at 15,000 nano: 61,440,000 nano, far above the account's 10,000.
      const r = await fetch(`${gw.url}/audio/speech`, {
        method: 'POST',
        headers: { authorization: `Bearer ${poor}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'sim/tts', input: 'y'.repeat(4096) }),
      });
      expect(r.status).toBe(402);
      expect(((await r.json()) as { error: unknown }).error).toMatchObject({ type: 'insufficient_quota' });
      expect(await credits()).toEqual(before);
    });
  });

  describe('transcriptions and translations', () => {
    it('transcribes a WAV through the SDK, billed the seconds the model reports, to the nano', async () => {
      const before = await balance();
      const { data, response } = await client.audio.transcriptions
        .create({ file: await toFile(recording(3, 'the quick brown fox'), 'fox.wav', { type: 'audio/wav' }), model: 'sim/whisper' })
        .withResponse();
      expect(data.text).toBe('the quick brown fox');
      const id = response.headers.get('x-svc-generation-id')!;
      const cost = 3n * NANO_PER_SECOND;
      expect(usdToNano(response.headers.get('x-svc-cost')!)).toBe(cost);
      expect(before - (await balance())).toBe(cost);
      expect(await generation(id)).toMatchObject({
        model: 'sim/whisper',
        endpoint: '/v1/audio/transcriptions',
        status: 'completed',
        usage_by_meter: { seconds: 3 },
      });
    });

    it('spec 4.16 prices: a per-token transcriber bills its audio tokens at the audio input price, the rest as text', async () => {
      const before = await balance();
      const { data, response } = await client.audio.transcriptions
        .create({ file: await toFile(recording(2, 'the quick brown fox'), 'fox.wav', { type: 'audio/wav' }), model: 'sim/transcribe' })
        .withResponse();
      const usage = data.usage as { type: string; input_tokens: number; output_tokens: number; input_token_details: { audio_tokens: number } };
      const audio = usage.input_token_details.audio_tokens;
      expect(audio).toBeGreaterThan(0);
      // sim/transcribe: $2.50 / M text in, $6.00 / M audio in, $10.00 / M out; text and audio each rounded up to the nano.
      const up = (n: bigint) => (n + 999_999n) / 1_000_000n;
      const cost = up(BigInt(usage.input_tokens - audio) * 2_500_000_000n + BigInt(usage.output_tokens) * 10_000_000_000n) + up(BigInt(audio) * 6_000_000_000n);
      const id = response.headers.get('x-svc-generation-id')!;
      expect(usdToNano(response.headers.get('x-svc-cost')!)).toBe(cost);
      expect(before - (await balance())).toBe(cost);
      expect(await generation(id)).toMatchObject({ model: 'sim/transcribe', usage_by_meter: { audio_input: audio, output: usage.output_tokens } });
    });

    it("answers srt as text and bills the audio's own length when the answer reports none", async () => {
      const before = await balance();
      const form = new FormData();
      form.append('file', new Blob([recording(2, 'One sentence. Another one.')], { type: 'audio/wav' }), 'two.wav');
      form.append('model', 'sim/whisper');
      form.append('response_format', 'srt');
      form.append('unheard_of', 'x');
      const r = await fetch(`${gw.url}/audio/transcriptions`, { method: 'POST', headers: { authorization: `Bearer ${key()}` }, body: form });
      expect(r.status).toBe(200);
      expect(r.headers.get('content-type')).toMatch(/^text\/plain/);
      const text = await r.text();
      expect(text).toMatch(/^1\n00:00:00,000 --> 00:00:0\d,\d{3}\nOne sentence\./);
      expect(r.headers.get('x-svc-ignored-params')).toBe('unheard_of');
      expect(before - (await balance())).toBe(2n * NANO_PER_SECOND);
    });

    it('translates to English through the SDK', async () => {
      const translation = await client.audio.translations.create({ file: await toFile(recording(1, 'bonjour'), 'fr.wav'), model: 'sim/whisper' });
      expect(translation.text).toBe('bonjour');
    });

    const transcribe = (audio: Buffer, fields: Record<string, string>, as = key()) => {
      const form = new FormData();
      form.append('file', new Blob([audio], { type: 'audio/wav' }), 'a.wav');
      for (const [name, value] of Object.entries(fields)) form.append(name, value);
      return fetch(`${gw.url}/audio/transcriptions`, { method: 'POST', headers: { authorization: `Bearer ${as}` }, body: form });
    };

    it('spec 1 rule 3: a provider failure and an empty transcript are not billed', async () => {
      const before = await balance();
      const failed = await transcribe(recording(2, 'words'), { model: 'sim/whisper', prompt: 'x\n#sim {"fail": 503}' });
      expect(failed.status).toBe(503);
      const empty = await transcribe(recording(2, 'words'), { model: 'sim/whisper', prompt: 'x\n#sim {"empty": true}' });
      expect(empty.status).toBe(200);
      expect(((await empty.json()) as { text: string }).text).toBe('');
      expect(empty.headers.get('x-svc-cost')).toBe('0');
      expect(await balance()).toBe(before);
      expect(await generation(empty.headers.get('x-svc-generation-id')!)).toMatchObject({ status: 'not_billed', total_cost: 0 });
    });

    it('spec 1 rule 1: audio longer than the balance covers is 402 and changes nothing', async () => {
      const { key: poor } = await createAccountWithKey(api(gw.url.replace(/\/v1$/, '')), gw.keys.admin_token, 0.0002);
      const credits = async () => (await call('GET', '/credits', { key: poor })).json.data;
      const before = await credits();
      // 3 seconds at $0.0001: $0.0003, above the $0.0002 the account holds; 2 seconds fit.
      const refused = await transcribe(recording(3, 'too long'), { model: 'sim/whisper' }, poor);
      expect(refused.status).toBe(402);
      expect(((await refused.json()) as { error: unknown }).error).toMatchObject({ type: 'insufficient_quota' });
      expect(await credits()).toEqual(before);
      expect((await transcribe(recording(2, 'fits'), { model: 'sim/whisper' }, poor)).status).toBe(200);
    });

    it('refuses a 26 MB file with 413 naming file, and bills nothing', async () => {
      const before = await balance();
      const form = new FormData();
      form.append('model', 'sim/whisper');
      form.append('file', new Blob([Buffer.alloc(26 * 1024 * 1024, 1)]), 'big.wav');
      const r = await fetch(`${gw.url}/audio/transcriptions`, { method: 'POST', headers: { authorization: `Bearer ${key()}` }, body: form });
      expect(r.status).toBe(413);
      expect(((await r.json()) as { error: unknown }).error).toMatchObject({ type: 'invalid_request_error', param: 'file', code: 'file_too_large' });
      expect(await balance()).toBe(before);
    });

    it.each([
      [{ model: 'sim/whisper' }, 'file'],
      [{ file: true }, 'model'],
      [{ file: true, model: 'sim/whisper', response_format: 'xml' }, 'response_format'],
      [{ file: true, model: 'sim/whisper', temperature: 'hot' }, 'temperature'],
      [{ file: true, model: 'sim/tts' }, 'model'],
      [{ file: true, model: 'sim/echo' }, 'model'],
    ])('refuses the form %j with a 400 naming %s', async (fields, param) => {
      const form = new FormData();
      for (const [name, value] of Object.entries(fields)) {
        if (name === 'file') form.append('file', new Blob([recording(1, 'x')]), 'x.wav');
        else form.append(name, String(value));
      }
      const before = await balance();
      const r = await fetch(`${gw.url}/audio/transcriptions`, { method: 'POST', headers: { authorization: `Bearer ${key()}` }, body: form });
      expect(r.status).toBe(400);
      expect(((await r.json()) as { error: unknown }).error).toMatchObject({ type: 'invalid_request_error', param });
      expect(await balance()).toBe(before);
    });

    it('takes a multipart form only where a file is expected: elsewhere 415', async () => {
      const form = new FormData();
      form.append('model', 'sim/echo');
      const r = await fetch(`${gw.url}/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${key()}` }, body: form });
      expect(r.status).toBe(415);
      expect(((await r.json()) as { error: unknown }).error).toMatchObject({ code: 'unsupported_media_type' });
    });

    it('transcribes what the speech endpoint said, both billed by their own meters', async () => {
      const spoken = await speech({ model: 'sim/tts', voice: 'sage', input: 'round trip', response_format: 'wav' });
      const audio = Buffer.from(await spoken.arrayBuffer());
      const seconds = Math.ceil(parseWav(audio)!.seconds);
      const before = await balance();
      const heard = await client.audio.transcriptions.create({ file: await toFile(audio, 'said.wav'), model: 'sim/whisper', response_format: 'verbose_json' });
      expect(heard.duration).toBeCloseTo(parseWav(audio)!.seconds, 2);
      expect(before - (await balance())).toBe(BigInt(seconds) * NANO_PER_SECOND);
    });
  });
});
