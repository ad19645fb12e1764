/**
 * The simulator's realtime endpoint over a real WebSocket, as a gateway's relay dials it: the
 * handshake, the GA event sequence, the audio and token rules of ./realtime.ts, directives,
 * errors, and what the simulator records. openai-node's OpenAIRealtimeWS always dials wss://,
 * so the client here is `ws` itself.
 */
import WebSocket from 'ws';
import { countTextTokens } from '../tokens';
import { pcm, tone } from './audio-formats';
import { DEFAULT_INSTRUCTIONS, OUTPUT_AUDIO_SAMPLES_PER_TOKEN, STALL_PIECES } from './realtime';
import { startSimulator, type Simulator } from './server';

let sim: Simulator;
beforeAll(async () => {
  sim = await startSimulator({ realtimeDeltaMs: 2 });
});
afterAll(() => sim.close());

// Loosely typed on purpose: the tests assert the wire shape themselves.
type Wire = Record<string, any>;
const KEY = 'sk-realtime-test';
const WAIT_MS = 3000;

const wsUrl = (path: string) => `${sim.url.replace(/^http/, 'ws')}${path}`;

/** A connected client that queues the server's events, so a test reads them in order. */
class Client {
  readonly events: Wire[] = [];
  private read = 0;
  private wake: (() => void) | null = null;
  closed: Promise<number>;

  constructor(readonly ws: WebSocket) {
    ws.on('message', (data) => {
      this.events.push(JSON.parse(data.toString()));
      this.wake?.();
    });
    this.closed = new Promise((resolve) => ws.on('close', (code) => resolve(code)));
  }

  static async open(
    path = '/realtime?model=gpt-realtime',
    protocols: string[] = ['realtime'],
    headers: Record<string, string> = { authorization: `Bearer ${KEY}` },
  ) {
    const ws = new WebSocket(wsUrl(path), protocols, { headers });
    const client = new Client(ws);
    await new Promise<void>((resolve, reject) => {
      ws.once('open', resolve);
      ws.once('error', reject);
    });
    return client;
  }

  send(event: Wire): void {
    this.ws.send(typeof event === 'string' ? event : JSON.stringify(event));
  }

  /** The next event not read yet. */
  async next(): Promise<Wire> {
    const deadline = Date.now() + WAIT_MS;
    while (this.read >= this.events.length) {
      if (Date.now() > deadline) throw new Error(`no event after ${WAIT_MS} ms; read: ${this.events.map((e) => e.type).join(', ')}`);
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        setTimeout(resolve, 50);
      });
      this.wake = null;
    }
    return this.events[this.read++];
  }

  /** The events from the next one up to the first of `type`, included. */
  async until(type: string): Promise<Wire[]> {
    const out: Wire[] = [];
    for (;;) {
      const event = await this.next();
      out.push(event);
      if (event.type === type) return out;
    }
  }

  async say(text: string): Promise<Wire> {
    this.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text }] } });
    return (await this.until('conversation.item.done')).at(-1)!.item;
  }

  async respond(response?: Wire): Promise<Wire[]> {
    this.send(response ? { type: 'response.create', response } : { type: 'response.create' });
    return this.until('response.done');
  }

  close(): void {
    this.ws.close();
  }
}

/** A client that starts a session: session.created read. */
async function session(...args: Parameters<typeof Client.open>): Promise<Client> {
  const client = await Client.open(...args);
  expect((await client.next()).type).toBe('session.created');
  return client;
}

/** The HTTP answer to an upgrade the simulator refuses. */
function refused(path: string, headers: Record<string, string>): Promise<{ status: number; body: Wire }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(wsUrl(path), ['realtime'], { headers });
    ws.on('unexpected-response', (_req, res) => {
      const parts: Buffer[] = [];
      res.on('data', (part: Buffer) => parts.push(part));
      res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(Buffer.concat(parts).toString()) }));
    });
    ws.on('open', () => reject(new Error('the upgrade was accepted')));
    ws.on('error', () => undefined);
  });
}

const types = (events: Wire[]) => events.map((e) => e.type);
const done = (events: Wire[]) => events.at(-1)!.response;
/** The PCM16 samples of the audio deltas, decoded. */
const audioOf = (events: Wire[]) => Buffer.concat(events.filter((e) => e.type === 'response.output_audio.delta').map((e) => Buffer.from(e.delta, 'base64')));
const transcriptOf = (events: Wire[], type = 'response.output_audio_transcript.delta') =>
  events
    .filter((e) => e.type === type)
    .map((e) => e.delta)
    .join('');
const instructionTokens = countTextTokens(DEFAULT_INSTRUCTIONS);

describe('handshake', () => {
  it('refuses an upgrade without a key with a plain HTTP 401 and an OpenAI error body', async () => {
    const { status, body } = await refused('/realtime?model=gpt-realtime', {});
    expect(status).toBe(401);
    expect(body.error).toMatchObject({ type: 'authentication_error', code: 'invalid_api_key' });
    const wrong = await refused('/realtime?model=gpt-realtime', { authorization: 'Basic abc' });
    expect(wrong.status).toBe(401);
  });

  it('answers another path with 404 and a missing model with 400', async () => {
    expect((await refused('/realtimes?model=gpt-realtime', { authorization: `Bearer ${KEY}` })).status).toBe(404);
    const noModel = await refused('/realtime', { authorization: `Bearer ${KEY}` });
    expect(noModel).toMatchObject({ status: 400, body: { error: { param: 'model' } } });
  });

  it('selects the realtime subprotocol and opens with session.created', async () => {
    const client = await Client.open('/realtime?model=gpt-realtime-mini');
    expect(client.ws.protocol).toBe('realtime');
    const created = await client.next();
    expect(created).toEqual({
      type: 'session.created',
      event_id: expect.stringMatching(/^event_/),
      session: expect.objectContaining({
        type: 'realtime',
        object: 'realtime.session',
        id: expect.stringMatching(/^sess_/),
        model: 'gpt-realtime-mini',
        output_modalities: ['audio'],
        instructions: DEFAULT_INSTRUCTIONS,
        max_output_tokens: 'inf',
        audio: {
          input: { format: { type: 'audio/pcm', rate: 24000 }, transcription: null, noise_reduction: null, turn_detection: null },
          output: { format: { type: 'audio/pcm', rate: 24000 }, voice: 'alloy', speed: 1 },
        },
      }),
    });
    const record = sim.realtime.sessions.at(-1)!;
    expect(record).toMatchObject({ id: created.session.id, model: 'gpt-realtime-mini', key: KEY, protocol: 'realtime', open: true });
    client.close();
    await client.closed;
    for (let i = 0; i < 50 && record.open; i++) await new Promise((r) => setTimeout(r, 10));
    expect(record.open).toBe(false);
  });

  it("takes a browser's key from the openai-insecure-api-key subprotocol and never selects that one", async () => {
    const client = await Client.open('/realtime?model=gpt-realtime', ['realtime', 'openai-insecure-api-key.sk-browser'], {});
    expect(client.ws.protocol).toBe('realtime');
    expect(sim.realtime.sessions.at(-1)).toMatchObject({ key: 'sk-browser', protocol: 'realtime' });
    client.close();
  });
});

describe('session and conversation', () => {
  it('merges session.update into the session and refuses a session.type other than realtime', async () => {
    const client = await session();
    client.send({ type: 'session.update', session: { type: 'realtime', instructions: 'Be brief.', audio: { output: { voice: 'marin' } } } });
    const updated = await client.next();
    expect(updated.type).toBe('session.updated');
    expect(updated.session).toMatchObject({
      instructions: 'Be brief.',
      output_modalities: ['audio'],
      audio: { output: { voice: 'marin', format: { type: 'audio/pcm', rate: 24000 } } },
    });

    client.send({ type: 'session.update', event_id: 'evt_client_1', session: { type: 'transcription', instructions: 'ignored' } });
    expect(await client.next()).toEqual({
      type: 'error',
      event_id: expect.stringMatching(/^event_/),
      error: { type: 'invalid_request_error', code: 'invalid_value', message: expect.any(String), param: 'session.type', event_id: 'evt_client_1' },
    });
    client.send({ type: 'session.update', session: { type: 'realtime' } });
    expect((await client.next()).session.instructions).toBe('Be brief.');
    client.close();
  });

  it('adds an item (added, then done) with an id, completed, chained by previous_item_id', async () => {
    const client = await session();
    client.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'first' }] } });
    const [added, done1] = await client.until('conversation.item.done');
    expect(added).toMatchObject({
      type: 'conversation.item.added',
      previous_item_id: null,
      item: { id: expect.stringMatching(/^item_/), status: 'completed', role: 'user' },
    });
    expect(done1.item).toEqual(added.item);
    client.send({
      type: 'conversation.item.create',
      item: { id: 'item_mine', type: 'message', role: 'system', content: [{ type: 'input_text', text: 'second' }] },
    });
    const [second] = await client.until('conversation.item.done');
    expect(second).toMatchObject({ previous_item_id: added.item.id, item: { id: 'item_mine', status: 'completed', object: 'realtime.item' } });
    client.close();
  });
});

describe('responses', () => {
  it('streams the GA audio sequence, with real PCM16 whose length gives output audio tokens', async () => {
    const client = await session();
    await client.say('Hello there');
    const events = await client.respond();
    const n = events.filter((e) => e.type === 'response.output_audio.delta').length;
    expect(n).toBe(3); // "Echo: ", "Hello ", "there"
    expect(types(events)).toEqual([
      'response.created',
      'response.output_item.added',
      'conversation.item.added',
      'response.content_part.added',
      ...Array.from({ length: n }, () => ['response.output_audio_transcript.delta', 'response.output_audio.delta']).flat(),
      'response.output_audio.done',
      'response.output_audio_transcript.done',
      'response.content_part.done',
      'response.output_item.done',
      'conversation.item.done',
      'response.done',
    ]);
    expect(events[0].response).toMatchObject({ object: 'realtime.response', status: 'in_progress', output: [], usage: null });
    const ids = events.map((e) => e.event_id);
    expect(new Set(ids).size).toBe(ids.length);

    const transcript = 'Echo: Hello there';
    expect(transcriptOf(events)).toBe(transcript);
    expect(events.find((e) => e.type === 'response.output_audio_transcript.done')!.transcript).toBe(transcript);
    const audio = audioOf(events);
    const samples = Int16Array.from({ length: audio.length / 2 }, (_, i) => audio.readInt16LE(i * 2));
    expect(Math.max(...samples)).toBeGreaterThan(1000); // a tone, not silence
    const response = done(events);
    expect(response).toMatchObject({ status: 'completed', status_details: null, output_modalities: ['audio'] });
    expect(response.output[0]).toMatchObject({ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_audio', transcript }] });
    // The documented rule: one output audio token per 50 ms of 24 kHz audio (1200 samples), 50 ms a character.
    expect(samples.length % OUTPUT_AUDIO_SAMPLES_PER_TOKEN).toBe(0);
    expect(response.usage.output_token_details.audio_tokens).toBe(samples.length / OUTPUT_AUDIO_SAMPLES_PER_TOKEN);
    expect(response.usage.output_token_details.audio_tokens).toBe(transcript.length);
    client.close();
  });

  it('reports usage from the conversation, with the previous response input as cached tokens', async () => {
    const client = await session();
    await client.say('Hello there');
    const first = done(await client.respond()).usage;
    const inputText = instructionTokens + countTextTokens('Hello there');
    const outputText = countTextTokens('Echo: Hello there');
    expect(first).toEqual({
      total_tokens: inputText + outputText + 17,
      input_tokens: inputText,
      output_tokens: outputText + 17,
      input_token_details: {
        text_tokens: inputText,
        audio_tokens: 0,
        image_tokens: 0,
        cached_tokens: 0,
        cached_tokens_details: { text_tokens: 0, audio_tokens: 0, image_tokens: 0 },
      },
      output_token_details: { text_tokens: outputText, audio_tokens: 17 },
    });

    await client.say('And again');
    const second = done(await client.respond()).usage;
    // The first answer is heard again as audio: 17 x 50 ms = 850 ms, 9 input tokens at 100 ms each.
    expect(second.input_token_details).toEqual({
      text_tokens: inputText + countTextTokens('And again'),
      audio_tokens: 9,
      image_tokens: 0,
      cached_tokens: first.input_tokens,
      cached_tokens_details: { text_tokens: inputText, audio_tokens: 0, image_tokens: 0 },
    });
    expect(second.input_tokens).toBe(inputText + countTextTokens('And again') + 9);
    client.close();
  });

  it('answers in text with output_text events when the session asks for text', async () => {
    const client = await session();
    client.send({ type: 'session.update', session: { type: 'realtime', output_modalities: ['text'] } });
    await client.until('session.updated');
    await client.say('Plain words');
    const events = await client.respond();
    expect(types(events).filter((t) => t.includes('audio'))).toEqual([]);
    expect(types(events)).toContain('response.output_text.done');
    expect(transcriptOf(events, 'response.output_text.delta')).toBe('Echo: Plain words');
    const response = done(events);
    expect(response.output[0].content).toEqual([{ type: 'output_text', text: 'Echo: Plain words' }]);
    expect(response.usage.output_token_details).toEqual({ text_tokens: countTextTokens('Echo: Plain words'), audio_tokens: 0 });
    client.close();
  });

  it('cuts the reply at max_output_tokens (text plus audio) and ends incomplete', async () => {
    const client = await session();
    await client.say('Hello there');
    const events = await client.respond({ max_output_tokens: 12 });
    const response = done(events);
    // "Echo: " costs its text tokens plus 6 audio tokens; "Echo: Hello " would pass 12.
    expect(transcriptOf(events)).toBe('Echo: ');
    expect(response).toMatchObject({ status: 'incomplete', status_details: { type: 'incomplete', reason: 'max_output_tokens' }, max_output_tokens: 12 });
    expect(response.output[0].status).toBe('incomplete');
    expect(response.usage.output_tokens).toBe(countTextTokens('Echo: ') + 6);
    expect(response.usage.output_tokens).toBeLessThanOrEqual(12);
    client.close();
  });

  it('cuts a text reply by the session max_output_tokens', async () => {
    const client = await session();
    client.send({ type: 'session.update', session: { type: 'realtime', output_modalities: ['text'], max_output_tokens: 2 } });
    await client.until('session.updated');
    await client.say('one two three four');
    const response = done(await client.respond());
    expect(response.status).toBe('incomplete');
    expect(response.usage.output_token_details.text_tokens).toBe(2);
    client.close();
  });
});

describe('input audio', () => {
  /** 1.05 s of 24 kHz PCM16: 11 input tokens by the 100 ms rule, rounded up. */
  const speech = pcm(tone(25_200));

  it('commits the buffer as a user input_audio item, and reports the transcription with its usage', async () => {
    const client = await session();
    client.send({ type: 'session.update', session: { type: 'realtime', audio: { input: { transcription: { model: 'gpt-4o-transcribe' } } } } });
    await client.until('session.updated');
    client.send({ type: 'input_audio_buffer.append', audio: speech.subarray(0, 20_000).toString('base64') });
    client.send({ type: 'input_audio_buffer.append', audio: speech.subarray(20_000).toString('base64') });
    client.send({ type: 'input_audio_buffer.commit' });
    const events = await client.until('conversation.item.input_audio_transcription.completed');
    expect(types(events)).toEqual([
      'input_audio_buffer.committed',
      'conversation.item.added',
      'conversation.item.done',
      'conversation.item.input_audio_transcription.completed',
    ]);
    const [committed, added, , transcribed] = events;
    expect(committed).toMatchObject({ item_id: added.item.id, previous_item_id: null });
    expect(added.item).toMatchObject({ role: 'user', status: 'completed', content: [{ type: 'input_audio', transcript: null }] });
    expect(transcribed.transcript).toMatch(/\w/);
    const output = countTextTokens(transcribed.transcript);
    expect(transcribed).toMatchObject({
      item_id: added.item.id,
      content_index: 0,
      usage: { type: 'tokens', input_tokens: 11, output_tokens: output, total_tokens: 11 + output, input_token_details: { text_tokens: 0, audio_tokens: 11 } },
    });

    // The model hears the same words, and is billed the audio as input.
    const response = await client.respond();
    expect(transcriptOf(response)).toBe(`Echo: ${transcribed.transcript}`);
    expect(done(response).usage.input_token_details.audio_tokens).toBe(11);
    client.close();
  });

  it('hears #sim-text and #sim lines in the audio, as the transcription model does', async () => {
    const client = await session();
    const marked = Buffer.concat([speech, Buffer.from('\n#sim-text what time is it\n#sim {"completion_tokens": 2}\n')]);
    client.send({ type: 'input_audio_buffer.append', audio: marked.toString('base64') });
    client.send({ type: 'input_audio_buffer.commit' });
    await client.until('conversation.item.done');
    const events = await client.respond({ output_modalities: ['text'] });
    expect(transcriptOf(events, 'response.output_text.delta')).toBe('token token');
    client.close();
  });

  it('refuses to commit an empty buffer, and clear empties it', async () => {
    const client = await session();
    client.send({ type: 'input_audio_buffer.commit', event_id: 'evt_commit' });
    expect(await client.next()).toMatchObject({ type: 'error', error: { code: 'input_audio_buffer_commit_empty', event_id: 'evt_commit' } });
    client.send({ type: 'input_audio_buffer.append', audio: speech.toString('base64') });
    client.send({ type: 'input_audio_buffer.clear' });
    expect((await client.next()).type).toBe('input_audio_buffer.cleared');
    client.send({ type: 'input_audio_buffer.commit' });
    expect((await client.next()).error.code).toBe('input_audio_buffer_commit_empty');
    client.close();
  });
});

describe('directives and cancel', () => {
  it('fails a response with fail: true: response.done failed, no output, 0 output tokens', async () => {
    const client = await session();
    await client.say('#sim {"fail": true}\nHello');
    const events = await client.respond();
    expect(types(events)).toEqual(['response.created', 'response.done']);
    const response = done(events);
    expect(response).toMatchObject({ status: 'failed', status_details: { type: 'failed', error: { type: 'server_error', code: 'sim_failure' } }, output: [] });
    // The item's text is billed as sent, #sim line included: it reached the model.
    expect(response.usage).toMatchObject({
      input_tokens: instructionTokens + countTextTokens('#sim {"fail": true}\nHello'),
      output_tokens: 0,
      output_token_details: { text_tokens: 0, audio_tokens: 0 },
    });
    client.close();
  });

  it('stalls after a few deltas until response.cancel, then ends cancelled with the usage so far', async () => {
    const client = await session();
    await client.say('#sim {"stall": true}\none two three four five');
    client.send({ type: 'response.create' });
    const head = await client.until('response.content_part.added');
    const deltas = [];
    for (let i = 0; i < STALL_PIECES * 2; i++) deltas.push(await client.next());
    expect(types(deltas)).toEqual([
      'response.output_audio_transcript.delta',
      'response.output_audio.delta',
      'response.output_audio_transcript.delta',
      'response.output_audio.delta',
    ]);
    const heard = client.events.length;
    await new Promise((r) => setTimeout(r, 100));
    expect(client.events.length).toBe(heard);

    client.send({ type: 'response.create', event_id: 'evt_second' });
    expect((await client.next()).error).toMatchObject({ code: 'conversation_already_has_active_response', event_id: 'evt_second' });
    client.send({ type: 'response.cancel', response_id: head[0].response.id });
    const tail = await client.until('response.done');
    expect(types(tail)).toEqual([
      'response.output_audio.done',
      'response.output_audio_transcript.done',
      'response.content_part.done',
      'response.output_item.done',
      'conversation.item.done',
      'response.done',
    ]);
    const response = done(tail);
    const sent = 'Echo: one ';
    expect(response).toMatchObject({ status: 'cancelled', status_details: { type: 'cancelled', reason: 'client_cancelled' } });
    expect(response.output[0]).toMatchObject({ status: 'incomplete', content: [{ type: 'output_audio', transcript: sent }] });
    expect(response.usage.output_token_details).toEqual({ text_tokens: countTextTokens(sent), audio_tokens: sent.length });

    client.send({ type: 'response.cancel', event_id: 'evt_late' });
    expect(await client.next()).toMatchObject({
      type: 'error',
      error: { type: 'invalid_request_error', code: 'response_cancel_not_active', event_id: 'evt_late' },
    });
    client.close();
  });

  it('lets a stalled response end with the socket', async () => {
    const client = await session();
    await client.say('#sim {"stall": true}\nhold on');
    client.send({ type: 'response.create' });
    await client.until('response.output_audio.delta');
    const record = sim.realtime.sessions.at(-1)!;
    client.close();
    await client.closed;
    for (let i = 0; i < 50 && record.open; i++) await new Promise((r) => setTimeout(r, 10));
    expect(record.open).toBe(false);
  });

  it('drops the socket without a close frame after cut_after_chunks pieces', async () => {
    const client = await session();
    await client.say('#sim {"cut_after_chunks": 1}\nsome longer answer');
    client.send({ type: 'response.create' });
    expect(await client.closed).toBe(1006);
    expect(types(client.events).filter((t) => t.endsWith('.delta'))).toEqual(['response.output_audio_transcript.delta', 'response.output_audio.delta']);
    expect(types(client.events)).not.toContain('response.done');
  });

  it('answers an invalid directive with an error event and no response', async () => {
    const client = await session();
    await client.say('#sim {"no_such_thing": 1}\nHello');
    client.send({ type: 'response.create' });
    expect(await client.next()).toMatchObject({ type: 'error', error: { code: 'invalid_sim_directive' } });
    await client.say('Hello');
    expect(done(await client.respond()).status).toBe('completed');
    client.close();
  });
});

describe('errors and records', () => {
  it('answers malformed JSON and unknown event types with error events, and keeps the session', async () => {
    const client = await session();
    client.ws.send('{not json');
    expect(await client.next()).toEqual({
      type: 'error',
      event_id: expect.stringMatching(/^event_/),
      error: { type: 'invalid_request_error', code: 'invalid_json', message: expect.any(String), param: null, event_id: null },
    });
    client.send({ type: 'response.text.delta', event_id: 'evt_beta' }); // a beta name, not a GA client event
    expect(await client.next()).toMatchObject({
      type: 'error',
      error: { type: 'invalid_request_error', code: 'invalid_value', param: 'type', event_id: 'evt_beta' },
    });
    await client.say('still there?');
    expect(done(await client.respond()).status).toBe('completed');
    client.close();
  });

  it('records per session what the client sent, malformed frames included', async () => {
    const client = await session('/realtime?model=gpt-realtime-2');
    client.send({ type: 'session.update', session: { type: 'realtime', instructions: 'x' } });
    await client.next();
    client.ws.send('oops');
    await client.next();
    client.send({ type: 'input_audio_buffer.append', audio: 'AAAA' });
    client.send({ type: 'input_audio_buffer.clear' });
    await client.next();
    const record = sim.realtime.sessions.at(-1)!;
    expect(record).toMatchObject({ model: 'gpt-realtime-2', key: KEY });
    expect(record.received).toEqual([
      { type: 'session.update', session: { type: 'realtime', instructions: 'x' } },
      'oops',
      { type: 'input_audio_buffer.append', audio: 'AAAA' },
      { type: 'input_audio_buffer.clear' },
    ]);
    client.close();
  });

  it('closes with open realtime sockets', async () => {
    const own = await startSimulator();
    const ws = new WebSocket(`${own.url.replace(/^http/, 'ws')}/realtime?model=m`, ['realtime'], { headers: { authorization: 'Bearer k' } });
    await new Promise((resolve) => ws.once('open', resolve));
    const closed = new Promise((resolve) => ws.once('close', resolve));
    await own.close();
    await closed;
  });
});
