/**
 * The simulator's media, moderation and rerank routes over real HTTP: exact wire shapes, real
 * file formats (parsed here independently of the encoders), determinism, directives and errors,
 * and the official `openai` SDK where it has the endpoint.
 */
import { createHash } from 'node:crypto';
import { inflateSync } from 'node:zlib';
import OpenAI, { toFile } from 'openai';
import { countTextTokens } from '../tokens';
import { tone, wav } from './audio-formats';
import { ImageStore } from './images';
import { MODERATION_CATEGORIES } from './moderations';
import { crc32 } from './png';
import { startSimulator, type Simulator } from './server';

let sim: Simulator;
let origin: string;
let client: OpenAI;
beforeAll(async () => {
  sim = await startSimulator();
  origin = sim.url.replace(/\/v1$/, '');
  client = new OpenAI({ baseURL: sim.url, apiKey: 'sk-sim', maxRetries: 0 });
});
afterAll(() => sim.close());

const AUTH = { authorization: 'Bearer test-key' };
const JSON_HEADERS = { ...AUTH, 'content-type': 'application/json' };

/** A JSON object from the wire, read loosely: each test asserts the shape it needs. */
type Wire = Record<string, unknown>;
type WireList = Wire[];

interface Answer {
  status: number;
  contentType: string | null;
  bytes: Buffer;
  json: Wire;
}

async function send(url: string, init: RequestInit): Promise<Answer> {
  const response = await fetch(url, init);
  const bytes = Buffer.from(await response.arrayBuffer());
  const contentType = response.headers.get('content-type');
  const json = contentType?.startsWith('application/json') ? (JSON.parse(bytes.toString('utf8')) as Wire) : {};
  return { status: response.status, contentType, bytes, json };
}

const post = (path: string, body: unknown, headers: Record<string, string> = JSON_HEADERS) =>
  send(origin + path, { method: 'POST', headers, body: JSON.stringify(body) });

const openAiError = (code: string | null, param: string | null, type: string) => ({
  error: { message: expect.any(String), type, code, param },
});

/* ------------------------------------------------------------------ PNG reading */

/** A CRC-32 computed bit by bit, independent of the table-driven encoder's. */
function referenceCrc32(bytes: Uint8Array): number {
  let c = 0xffffffff;
  for (const byte of bytes) {
    c ^= byte;
    for (let k = 0; k < 8; k++) c = (c >>> 1) ^ (0xedb88320 & -(c & 1));
  }
  return (c ^ 0xffffffff) >>> 0;
}

interface Png {
  width: number;
  height: number;
  bitDepth: number;
  colourType: number;
  chunkTypes: string[];
  /** The rows, unfiltered: RGB bytes. */
  rows: Buffer[];
}

function readPng(bytes: Buffer): Png {
  expect(bytes.subarray(0, 8)).toEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
  const chunkTypes: string[] = [];
  const idat: Buffer[] = [];
  let ihdr: Buffer = Buffer.alloc(0);
  for (let at = 8; at < bytes.length;) {
    const length = bytes.readUInt32BE(at);
    const type = bytes.toString('latin1', at + 4, at + 8);
    const data = bytes.subarray(at + 8, at + 8 + length);
    expect(bytes.readUInt32BE(at + 8 + length)).toBe(referenceCrc32(bytes.subarray(at + 4, at + 8 + length)));
    chunkTypes.push(type);
    if (type === 'IHDR') ihdr = data;
    if (type === 'IDAT') idat.push(data);
    at += 12 + length;
  }
  const width = ihdr.readUInt32BE(0);
  const height = ihdr.readUInt32BE(4);
  const raw = inflateSync(Buffer.concat(idat));
  const stride = 1 + 3 * width;
  expect(raw.length).toBe(height * stride);
  const rows = Array.from({ length: height }, (_, y) => unfilter(raw.subarray(y * stride, (y + 1) * stride)));
  return { width, height, bitDepth: ihdr[8], colourType: ihdr[9], chunkTypes, rows };
}

/** Undoes filter 0 (None) or 1 (Sub), the ones a flat-row encoder may use. */
function unfilter(row: Buffer): Buffer {
  const out = Buffer.from(row.subarray(1));
  if (row[0] === 1) for (let i = 3; i < out.length; i++) out[i] = (out[i] + out[i - 3]) & 0xff;
  else expect(row[0]).toBe(0);
  return out;
}

const b64png = (image: unknown) => Buffer.from((image as { b64_json: string }).b64_json, 'base64');

/* ------------------------------------------------------------------ images */

describe('POST /v1/images/generations', () => {
  const generate = (body: Wire) => post('/v1/images/generations', { model: 'gpt-image-1', prompt: 'a red fox', ...body });

  it("answers OpenAI's ImagesResponse with gpt-image-1 token usage", async () => {
    const { status, json } = await generate({ n: 2 });
    expect(status).toBe(200);
    const text = countTextTokens('a red fox');
    expect(json).toEqual({
      created: expect.any(Number),
      data: [{ b64_json: expect.any(String) }, { b64_json: expect.any(String) }],
      size: '1024x1024',
      quality: 'medium',
      output_format: 'png',
      usage: {
        input_tokens: text,
        input_tokens_details: { text_tokens: text, image_tokens: 0 },
        output_tokens: 2 * 1056,
        output_tokens_details: { text_tokens: 0, image_tokens: 2 * 1056 },
        total_tokens: text + 2 * 1056,
      },
    });
    expect(Math.abs((json.created as number) - Date.now() / 1000)).toBeLessThan(60);
  });

  it('scales image tokens with size and quality as gpt-image-1 does (1024x1536 high = 6240)', async () => {
    const { json } = await generate({ size: '1024x1536', quality: 'high' });
    expect(json).toMatchObject({ size: '1024x1536', quality: 'high', usage: { output_tokens: 6240 } });
    const low = await generate({ size: '1024x1024', quality: 'low' });
    expect(low.json.usage).toMatchObject({ output_tokens: 272 });
  });

  it('renders a valid PNG of exactly the requested size, every CRC right, IDAT inflating to the right length', async () => {
    const { json } = await generate({ size: '300x200' });
    const png = readPng(b64png((json.data as WireList)[0]));
    expect([png.width, png.height, png.bitDepth, png.colourType]).toEqual([300, 200, 8, 2]);
    expect(png.chunkTypes[0]).toBe('IHDR');
    expect(png.chunkTypes.at(-1)).toBe('IEND');
    expect(png.rows).toHaveLength(200);
    // A vertical gradient: flat rows, top and bottom of different colours.
    for (const row of [png.rows[0], png.rows[199]]) expect(row.equals(Buffer.alloc(900, row.subarray(0, 3).toString('latin1'), 'latin1'))).toBe(true);
    expect(png.rows[0].subarray(0, 3)).not.toEqual(png.rows[199].subarray(0, 3));
  });

  it("computes PNG's CRC-32 (the check value of '123456789' is cbf43926)", () => {
    expect(crc32(Buffer.from('123456789')).toString(16)).toBe('cbf43926');
  });

  it('gives the same bytes for the same request, different ones per index, prompt and input image', async () => {
    const first = (await generate({ n: 2, size: '64x64' })).json.data as WireList;
    const again = (await generate({ n: 2, size: '64x64' })).json.data as WireList;
    expect(again).toEqual(first);
    expect(first[1]).not.toEqual(first[0]);
    const other = (await generate({ size: '64x64', prompt: 'a blue fox' })).json.data as WireList;
    expect(other[0]).not.toEqual(first[0]);
    const edit = (await generate({ size: '64x64', image: ['data:image/png;base64,AAAA'] })).json.data as WireList;
    expect(edit[0]).not.toEqual(first[0]);
    // #sim lines steer the request but are not part of the picture.
    const steered = (await generate({ n: 2, size: '64x64', prompt: 'a red fox\n#sim {"delay_ms": 1}' })).json.data as WireList;
    expect(steered).toEqual(first);
  });

  it('renders a 1792x1024 image in well under a second, a few KB large', async () => {
    const started = Date.now();
    const { json } = await generate({ size: '1792x1024' });
    expect(Date.now() - started).toBeLessThan(1000);
    const bytes = b64png((json.data as WireList)[0]);
    expect(bytes.length).toBeLessThan(20_000);
    expect(readPng(bytes).width).toBe(1792);
  });

  it('auto size renders the default 1024x1024', async () => {
    const { json } = await generate({ size: 'auto' });
    expect(json.size).toBe('1024x1024');
    expect(readPng(b64png((json.data as WireList)[0])).height).toBe(1024);
  });

  it('response_format url: a link under the simulator serving the same PNG, without auth', async () => {
    const { json } = await generate({ size: '32x16', response_format: 'url' });
    const [image] = json.data as WireList;
    expect(Object.keys(image)).toEqual(['url']);
    expect(image.url).toMatch(new RegExp(`^${origin}/v1/files/images/[0-9a-f]{64}\\.png$`));
    const fetched = await send(image.url as string, {});
    expect([fetched.status, fetched.contentType]).toEqual([200, 'image/png']);
    const inline = (await generate({ size: '32x16' })).json.data as WireList;
    expect(fetched.bytes).toEqual(b64png(inline[0]));
  });

  it('answers 404 with an OpenAI body for an image it does not hold', async () => {
    const { status, json } = await send(`${origin}/v1/files/images/${'0'.repeat(64)}.png`, {});
    expect([status, json]).toEqual([404, openAiError('not_found', null, 'not_found_error')]);
  });

  it('keeps the most recently used images, dropping the oldest', () => {
    const store = new ImageStore(2);
    const [a, b, c] = ['a', 'b', 'c'].map((s) => Buffer.from(s));
    const [idA, idB] = [store.put(a), store.put(b)];
    store.get(idA); // a is now the most recent
    const idC = store.put(c);
    expect([store.get(idA), store.get(idB), store.get(idC)]).toEqual([a, undefined, c]);
  });

  it('revised_prompt comes only from dall-e-3', async () => {
    const { json } = await generate({ model: 'dall-e-3', size: '16x16', prompt: 'a red fox\n#sim {"delay_ms": 0}' });
    expect((json.data as WireList)[0].revised_prompt).toBe('a red fox');
    expect((await generate({ size: '16x16' })).json.data).toEqual([{ b64_json: expect.any(String) }]);
  });

  it.each([
    [{ prompt: '' }, 'prompt'],
    [{ model: '' }, 'model'],
    [{ n: 0 }, 'n'],
    [{ n: 11 }, 'n'],
    [{ size: '1024' }, 'size'],
    [{ size: '4096x4096' }, 'size'],
    [{ quality: 'ultra' }, 'quality'],
    [{ response_format: 'jpeg' }, 'response_format'],
    [{ image: [42] }, 'image'],
  ])('answers 400 naming the field for %p', async (body, param) => {
    const { status, json } = await generate(body);
    expect([status, json]).toEqual([400, openAiError(null, param, 'invalid_request_error')]);
  });

  it('#sim fail answers that status with an OpenAI error body; empty answers no images', async () => {
    const failed = await generate({ prompt: 'x\n#sim {"fail": 503}' });
    expect([failed.status, failed.json]).toEqual([503, openAiError('sim_failure', null, 'api_error')]);
    const empty = await generate({ prompt: 'x\n#sim {"empty": true}', n: 3 });
    expect(empty.json).toMatchObject({ data: [], usage: { output_tokens: 0, output_tokens_details: { image_tokens: 0 } } });
  });

  it('#sim delay_ms waits before answering', async () => {
    const started = Date.now();
    await generate({ prompt: 'x\n#sim {"delay_ms": 120}', size: '8x8' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(115);
  });

  it('keeps the JSON body in received', async () => {
    await generate({ prompt: 'remember me', size: '8x8' });
    expect(sim.received.at(-1)).toEqual({ model: 'gpt-image-1', prompt: 'remember me', size: '8x8' });
  });
});

/* ------------------------------------------------------------------ speech */

interface WavHeader {
  format: number;
  channels: number;
  sampleRate: number;
  byteRate: number;
  blockAlign: number;
  bitsPerSample: number;
  dataBytes: number;
  samples: Int16Array;
}

function readWav(bytes: Buffer): WavHeader {
  expect([bytes.toString('latin1', 0, 4), bytes.toString('latin1', 8, 12), bytes.toString('latin1', 12, 16)]).toEqual(['RIFF', 'WAVE', 'fmt ']);
  expect(bytes.readUInt32LE(4)).toBe(bytes.length - 8);
  expect(bytes.toString('latin1', 36, 40)).toBe('data');
  const dataBytes = bytes.readUInt32LE(40);
  expect(dataBytes).toBe(bytes.length - 44);
  const samples = new Int16Array(dataBytes / 2).map((_, i) => bytes.readInt16LE(44 + i * 2));
  return {
    format: bytes.readUInt16LE(20),
    channels: bytes.readUInt16LE(22),
    sampleRate: bytes.readUInt32LE(24),
    byteRate: bytes.readUInt32LE(28),
    blockAlign: bytes.readUInt16LE(32),
    bitsPerSample: bytes.readUInt16LE(34),
    dataBytes,
    samples,
  };
}

/** Every frame of an MPEG audio stream: its header fields, checked to tile the body exactly. */
function readMp3Frames(bytes: Buffer) {
  const frames: Array<{ version: number; layer: number; kbps: number; sampleRate: number; mono: boolean; length: number }> = [];
  for (let at = 0; at < bytes.length;) {
    const h = bytes.readUInt32BE(at);
    expect(h >>> 21).toBe(0x7ff); // frame sync
    const version = (h >>> 19) & 3; // 3 = MPEG-1
    const layer = (h >>> 17) & 3; // 1 = Layer III
    const kbps = [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320][(h >>> 12) & 15];
    const sampleRate = [44_100, 48_000, 32_000][(h >>> 10) & 3];
    const length = Math.floor((144_000 * kbps) / sampleRate) + ((h >>> 9) & 1);
    frames.push({ version, layer, kbps, sampleRate, mono: ((h >>> 6) & 3) === 3, length });
    at += length;
    expect(at).toBeLessThanOrEqual(bytes.length);
  }
  return frames;
}

/** An MSB-first CRC with initial value 0, bit by bit: FLAC's CRC-8 and CRC-16, Ogg's CRC-32. */
function referenceCrc(bytes: Uint8Array, polynomial: number, width: 8 | 16 | 32): number {
  const mask = width === 32 ? 0xffffffff : (1 << width) - 1;
  let crc = 0;
  for (const byte of bytes) {
    for (let bit = 7; bit >= 0; bit--) {
      const top = ((crc >>> (width - 1)) & 1) ^ ((byte >> bit) & 1);
      crc = (((crc << 1) & mask) ^ (top ? polynomial : 0)) >>> 0;
    }
  }
  return crc;
}

/** A FLAC stream of VERBATIM 16-bit mono frames: STREAMINFO and the decoded samples, CRCs checked. */
function readFlac(bytes: Buffer) {
  expect(bytes.toString('latin1', 0, 4)).toBe('fLaC');
  expect(bytes[4]).toBe(0x80); // last metadata block, STREAMINFO
  const info = bytes.subarray(8, 42);
  const packed = info.readBigUInt64BE(10);
  const streamInfo = {
    sampleRate: Number(packed >> 44n),
    channels: Number((packed >> 41n) & 7n) + 1,
    bitsPerSample: Number((packed >> 36n) & 31n) + 1,
    totalSamples: Number(packed & 0xfffffffffn),
    md5: info.subarray(18, 34).toString('hex'),
  };
  const samples: number[] = [];
  for (let at = 42; at < bytes.length;) {
    expect(bytes.readUInt16BE(at)).toBe(0xfff8); // sync, fixed block size
    const blockCode = bytes[at + 2] >> 4;
    const lead = bytes[at + 4]; // UTF-8 coded frame number: as many bytes as the lead has leading ones
    let headerEnd = at + 4 + (lead < 0x80 ? 1 : Math.clz32(~(lead << 24)));
    let blockSize = 256 << (blockCode - 8);
    if (blockCode === 7) {
      blockSize = bytes.readUInt16BE(headerEnd) + 1;
      headerEnd += 2;
    }
    expect(bytes[headerEnd]).toBe(referenceCrc(bytes.subarray(at, headerEnd), 0x07, 8));
    expect(bytes[headerEnd + 1]).toBe(0x02); // VERBATIM subframe
    const end = headerEnd + 2 + blockSize * 2;
    for (let i = headerEnd + 2; i < end; i += 2) samples.push(bytes.readInt16BE(i));
    expect(bytes.readUInt16BE(end)).toBe(referenceCrc(bytes.subarray(at, end), 0x8005, 16));
    at = end + 2;
  }
  return { streamInfo, samples };
}

/** Ogg pages, each CRC checked with the polynomial bit by bit. */
function readOgg(bytes: Buffer) {
  const pages: Array<{ flags: number; granule: bigint; sequence: number; packets: Buffer[] }> = [];
  for (let at = 0; at < bytes.length;) {
    expect(bytes.toString('latin1', at, at + 4)).toBe('OggS');
    const segments = bytes[at + 26];
    const lacing = [...bytes.subarray(at + 27, at + 27 + segments)];
    const length = 27 + segments + lacing.reduce((a, b) => a + b, 0);
    const page = Buffer.from(bytes.subarray(at, at + length));
    const crc = page.readUInt32LE(22);
    page.writeUInt32LE(0, 22);
    expect(crc).toBe(referenceCrc(page, 0x04c11db7, 32));
    let offset = 27 + segments;
    const packets = lacing.map((size) => page.subarray(offset, (offset += size)));
    pages.push({ flags: page[5], granule: page.readBigInt64LE(6), sequence: page.readUInt32LE(18), packets });
    at += length;
  }
  return pages;
}

describe('POST /v1/audio/speech', () => {
  const speak = (body: Wire) => post('/v1/audio/speech', { model: 'tts-1', voice: 'alloy', input: 'Hello world', ...body });

  it('wav: RIFF/WAVE PCM 16-bit mono 24 kHz, 60 ms a character, a quiet tone', async () => {
    const { status, contentType, bytes } = await speak({ response_format: 'wav' });
    expect([status, contentType]).toEqual([200, 'audio/wav']);
    const wave = readWav(bytes);
    expect(wave).toMatchObject({ format: 1, channels: 1, sampleRate: 24_000, byteRate: 48_000, blockAlign: 2, bitsPerSample: 16 });
    expect(wave.dataBytes / 2 / 24_000).toBeCloseTo(11 * 0.06, 6);
    const peak = Math.max(...wave.samples.map(Math.abs));
    expect(peak).toBeGreaterThan(3000);
    expect(peak).toBeLessThanOrEqual(3277); // -20 dBFS
  });

  it('speed divides the duration, and no answer is shorter than 0.5 s', async () => {
    const normal = readWav((await speak({ response_format: 'wav', input: 'x'.repeat(20) })).bytes);
    const fast = readWav((await speak({ response_format: 'wav', input: 'x'.repeat(20), speed: 2 })).bytes);
    expect([normal.dataBytes / 2, fast.dataBytes / 2]).toEqual([20 * 0.06 * 24_000, (20 * 0.06 * 24_000) / 2]);
    const short = readWav((await speak({ response_format: 'wav', input: 'Hi' })).bytes);
    expect(short.dataBytes / 2).toBe(12_000);
  });

  it('pcm: the raw samples of the wav, as audio/pcm', async () => {
    const raw = await speak({ response_format: 'pcm' });
    expect(raw.contentType).toBe('audio/pcm');
    expect(raw.bytes).toEqual((await speak({ response_format: 'wav' })).bytes.subarray(44));
  });

  it('mp3 (the default): MPEG-1 Layer III frames, 48 kHz mono, covering the duration', async () => {
    const { contentType, bytes } = await speak({ input: 'x'.repeat(100) });
    expect(contentType).toBe('audio/mpeg');
    const frames = readMp3Frames(bytes);
    expect(frames[0]).toEqual({ version: 3, layer: 1, kbps: 32, sampleRate: 48_000, mono: true, length: 96 });
    expect(new Set(frames.map((f) => JSON.stringify(f))).size).toBe(1);
    expect(frames).toHaveLength(Math.ceil(6 / (1152 / 48_000))); // 100 characters: 6 s
  });

  it('flac: STREAMINFO and VERBATIM frames decoding to the same samples as the wav, MD5 included', async () => {
    const input = 'x'.repeat(150); // 9 s: several 4096-sample frames and a shorter last one
    const { contentType, bytes } = await speak({ response_format: 'flac', input });
    expect(contentType).toBe('audio/flac');
    const { streamInfo, samples } = readFlac(bytes);
    const pcmBytes = (await speak({ response_format: 'pcm', input })).bytes;
    expect(streamInfo).toEqual({
      sampleRate: 24_000,
      channels: 1,
      bitsPerSample: 16,
      totalSamples: 9 * 24_000,
      md5: createHash('md5').update(pcmBytes).digest('hex'),
    });
    expect(Int16Array.from(samples)).toEqual(new Int16Array(pcmBytes.buffer.slice(pcmBytes.byteOffset, pcmBytes.byteOffset + pcmBytes.length)));
  });

  it('opus: Ogg Opus pages with valid CRCs, OpusHead first, the last granule giving the exact duration', async () => {
    const { contentType, bytes } = await speak({ response_format: 'opus' });
    expect(contentType).toBe('audio/opus');
    const pages = readOgg(bytes);
    expect(pages[0].flags).toBe(0x02);
    const head = pages[0].packets[0];
    expect([head.toString('latin1', 0, 8), head[9], head.readUInt16LE(10)]).toEqual(['OpusHead', 1, 312]);
    expect(pages[1].packets[0].toString('latin1', 0, 8)).toBe('OpusTags');
    expect(pages.map((p) => p.sequence)).toEqual(pages.map((_, i) => i));
    const last = pages.at(-1)!;
    expect(last.flags).toBe(0x04);
    expect(Number(last.granule) - 312).toBe(Math.round(11 * 0.06 * 48_000));
    const packets = pages.slice(2).flatMap((p) => p.packets);
    expect(packets.length * 960).toBeGreaterThanOrEqual(Number(last.granule));
    expect(packets.every((p) => p[0] === 0xf8)).toBe(true); // CELT fullband 20 ms, mono, one frame
  });

  it('gives the same bytes for the same request', async () => {
    for (const response_format of ['wav', 'mp3', 'flac', 'opus']) {
      expect((await speak({ response_format })).bytes).toEqual((await speak({ response_format })).bytes);
    }
  });

  it.each([
    ['aac (not rendered)', { response_format: 'aac' }, 'response_format'],
    ['an unknown format', { response_format: 'ogg' }, 'response_format'],
    ['speed 0.2', { speed: 0.2 }, 'speed'],
    ['speed 4.5', { speed: 4.5 }, 'speed'],
    ['an empty voice', { voice: '' }, 'voice'],
    ['an empty input', { input: '' }, 'input'],
    ['4097 characters', { input: 'x'.repeat(4097) }, 'input'],
    ['a numeric model', { model: 7 }, 'model'],
  ])('answers 400 naming the field for %s', async (_what, body: Wire, param) => {
    const { status, json } = await speak(body);
    expect(status).toBe(400);
    expect(json).toMatchObject({ error: { type: 'invalid_request_error', param } });
  });

  it('accepts a custom voice object', async () => {
    expect((await speak({ voice: { id: 'voice_123' } })).status).toBe(200);
  });

  it('#sim fail answers an OpenAI error body; empty answers audio without samples', async () => {
    const failed = await speak({ input: 'hi\n#sim {"fail": 503}' });
    expect([failed.status, failed.contentType, failed.json]).toEqual([503, 'application/json', openAiError('sim_failure', null, 'api_error')]);
    const emptyWav = await speak({ input: 'hi\n#sim {"empty": true}', response_format: 'wav' });
    expect(readWav(emptyWav.bytes).dataBytes).toBe(0);
    expect((await speak({ input: 'hi\n#sim {"empty": true}' })).bytes).toHaveLength(0);
  });

  it('the #sim lines do not count as spoken characters', async () => {
    const plain = readWav((await speak({ response_format: 'wav', input: 'x'.repeat(20) })).bytes);
    const steered = readWav((await speak({ response_format: 'wav', input: `${'x'.repeat(20)}\n#sim {"delay_ms": 0}` })).bytes);
    expect(steered.dataBytes).toBe(plain.dataBytes);
  });
});

/* ------------------------------------------------------------------ transcriptions */

/** A WAV of `seconds` of tone, with lines appended after its data chunk. */
function wavWithLines(seconds: number, ...lines: string[]): Buffer {
  return withLines(wav(tone(Math.round(seconds * 24_000))), ...lines);
}

const withLines = (audio: Buffer, ...lines: string[]) => (lines.length ? Buffer.concat([audio, Buffer.from(`\n${lines.join('\n')}\n`)]) : audio);

function upload(path: string, file: Buffer | null, fields: Record<string, string | string[]>, filename = 'speech.wav') {
  const form = new FormData();
  for (const [name, value] of Object.entries(fields)) for (const v of [value].flat()) form.append(name, v);
  if (file) form.append('file', new Blob([file], { type: 'audio/wav' }), filename);
  return send(origin + path, { method: 'POST', headers: AUTH, body: form });
}

const transcribe = (file: Buffer | null, fields: Record<string, string | string[]> = {}) =>
  upload('/v1/audio/transcriptions', file, { model: 'whisper-1', ...fields });

const SENTENCES = 'The sun rises in the east. It sets in the west. Birds sing at dawn.';

describe('POST /v1/audio/transcriptions and /translations', () => {
  it('json with a whisper model: the #sim-text, billed by the second (rounded up)', async () => {
    const { status, contentType, json } = await transcribe(wavWithLines(2.4, `#sim-text ${SENTENCES}`));
    expect([status, contentType]).toEqual([200, 'application/json']);
    expect(json).toEqual({ text: SENTENCES, usage: { type: 'duration', seconds: 3 } });
  });

  it('json with a gpt-4o model: billed in audio, prompt and output tokens', async () => {
    const { json } = await transcribe(wavWithLines(2.4, '#sim-text hello there'), { model: 'gpt-4o-transcribe', prompt: 'names: Ada' });
    const [text, output] = [countTextTokens('names: Ada'), countTextTokens('hello there')];
    expect(json).toEqual({
      text: 'hello there',
      usage: {
        type: 'tokens',
        input_tokens: 24 + text,
        input_token_details: { audio_tokens: 24, text_tokens: text },
        output_tokens: output,
        total_tokens: 24 + text + output,
      },
    });
  });

  it('verbose_json: language name, duration from the WAV header, sentence segments tiling the audio', async () => {
    const { json } = await transcribe(wavWithLines(6, `#sim-text ${SENTENCES}`), { response_format: 'verbose_json', language: 'de', temperature: '0.2' });
    expect(json).toMatchObject({ task: 'transcribe', language: 'german', duration: 6, text: SENTENCES, usage: { type: 'duration', seconds: 6 } });
    const segments = json.segments as Array<{ id: number; seek: number; start: number; end: number; text: string; tokens: number[]; temperature: number }>;
    expect(segments.map((s) => s.text)).toEqual([' The sun rises in the east.', ' It sets in the west.', ' Birds sing at dawn.']);
    expect(segments.map((s) => s.id)).toEqual([0, 1, 2]);
    expect(segments[0].start).toBe(0);
    expect(segments.at(-1)!.end).toBe(6);
    for (const [i, s] of segments.entries()) {
      expect(s.end).toBeGreaterThan(s.start);
      if (i > 0) expect(s.start).toBeGreaterThanOrEqual(segments[i - 1].end);
      expect(s.tokens.length).toBe(countTextTokens(s.text));
      expect(s).toMatchObject({
        seek: 0,
        temperature: 0.2,
        avg_logprob: expect.any(Number),
        compression_ratio: expect.any(Number),
        no_speech_prob: expect.any(Number),
      });
    }
    expect(json).not.toHaveProperty('words');
  });

  it('verbose_json with timestamp_granularities[]=word lists timed words', async () => {
    const { json } = await transcribe(wavWithLines(2, '#sim-text Hello brave world.'), {
      response_format: 'verbose_json',
      'timestamp_granularities[]': ['word', 'segment'],
    });
    const words = json.words as Array<{ word: string; start: number; end: number }>;
    expect(words.map((w) => w.word)).toEqual(['Hello', 'brave', 'world']);
    expect(words[0].start).toBe(0);
    expect(words[2].end).toBe(2);
    expect(json.segments).toHaveLength(1);
  });

  it('text: the transcript as text/plain', async () => {
    const { contentType, bytes } = await transcribe(wavWithLines(1, '#sim-text plain words'), { response_format: 'text' });
    expect([contentType, bytes.toString()]).toEqual(['text/plain; charset=utf-8', 'plain words\n']);
  });

  it('srt: numbered cues with HH:MM:SS,mmm times', async () => {
    const silence = wav(new Int16Array(65 * 24_000));
    const { contentType, bytes } = await transcribe(withLines(silence, `#sim-text ${SENTENCES}`), { response_format: 'srt' });
    expect(contentType).toBe('text/plain; charset=utf-8');
    const cues = bytes.toString().split('\n\n').filter(Boolean);
    expect(cues).toHaveLength(3);
    for (const [i, cue] of cues.entries()) expect(cue).toMatch(new RegExp(`^${i + 1}\\n\\d{2}:\\d{2}:\\d{2},\\d{3} --> \\d{2}:\\d{2}:\\d{2},\\d{3}\\n\\S.*$`));
    expect(cues[0]).toMatch(/^1\n00:00:00,000 --> /);
    expect(cues[2]).toMatch(/--> 00:01:05,000\nBirds sing at dawn\.$/);
    expect(bytes.toString().endsWith('\n\n')).toBe(true);
  });

  it('vtt: a WEBVTT header, then cues with HH:MM:SS.mmm times', async () => {
    const { bytes } = await transcribe(wavWithLines(3, `#sim-text ${SENTENCES}`), { response_format: 'vtt' });
    const [header, ...cues] = bytes.toString().split('\n\n').filter(Boolean);
    expect(header).toBe('WEBVTT');
    expect(cues).toHaveLength(3);
    for (const cue of cues) expect(cue).toMatch(/^\d{2}:\d{2}:\d{2}\.\d{3} --> \d{2}:\d{2}:\d{2}\.\d{3}\n\S.*$/);
    expect(cues[2]).toMatch(/--> 00:00:03\.000\n/);
  });

  it('translations: task translate, language english', async () => {
    const { json } = await upload('/v1/audio/translations', wavWithLines(1, '#sim-text Good morning.'), {
      model: 'whisper-1',
      response_format: 'verbose_json',
    });
    expect(json).toMatchObject({ task: 'translate', language: 'english', text: 'Good morning.' });
  });

  it('without #sim-text: words chosen by a hash of the bytes, about 2.5 a second', async () => {
    const a = (await transcribe(wavWithLines(4))).json.text as string;
    expect((await transcribe(wavWithLines(4))).json.text).toBe(a);
    expect(a.split(' ')).toHaveLength(10);
    expect(a).toMatch(/^[A-Z][a-z ]+\.$/);
    const other = wav(tone(4 * 24_000).map((s) => s >> 1));
    expect((await transcribe(other)).json.text).not.toBe(a);
  });

  it('reads the duration of an MP3 from its frame headers (speech round trip)', async () => {
    const mp3 = (await post('/v1/audio/speech', { model: 'tts-1', voice: 'alloy', input: 'x'.repeat(50) })).bytes;
    const { json } = await transcribe(mp3, { response_format: 'verbose_json' });
    expect(json.duration).toBeCloseTo(3, 1);
  });

  it('#sim directives from the prompt or from lines in the file: fail, empty, delay_ms', async () => {
    const failed = await transcribe(wavWithLines(1), { prompt: '#sim {"fail": 503}' });
    expect([failed.status, failed.json]).toEqual([503, openAiError('sim_failure', null, 'api_error')]);
    const inFile = await transcribe(wavWithLines(1, '#sim-text hi', '#sim {"fail": 429}'));
    expect(inFile.status).toBe(429);
    const empty = await transcribe(wavWithLines(2, '#sim-text hi', '#sim {"empty": true}'), { response_format: 'verbose_json' });
    expect(empty.json).toMatchObject({ text: '', segments: [], duration: 2 });
    const started = Date.now();
    await transcribe(wavWithLines(1), { prompt: 'ctx\n#sim {"delay_ms": 120}' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(115);
  });

  it('keeps the multipart body in received as {model, ...fields, file: {bytes, filename}}', async () => {
    const file = wavWithLines(1);
    await transcribe(file, { language: 'en', response_format: 'text' });
    expect(sim.received.at(-1)).toEqual({ model: 'whisper-1', language: 'en', response_format: 'text', file: { bytes: file.length, filename: 'speech.wav' } });
  });

  it.each([
    ['no file', {}, 'file'],
    ['an empty model', { model: '' }, 'model'],
    ['an unknown format', { response_format: 'xml' }, 'response_format'],
    ['srt from a gpt-4o model', { model: 'gpt-4o-transcribe', response_format: 'srt' }, 'response_format'],
    ['temperature 2', { temperature: '2' }, 'temperature'],
    ['a language name', { language: 'english!' }, 'language'],
    ['a char granularity', { 'timestamp_granularities[]': 'char' }, 'timestamp_granularities'],
  ])('answers 400 naming the field for %s', async (what, fields: Record<string, string>, param) => {
    const { status, json } = await transcribe(what === 'no file' ? null : wavWithLines(1), fields);
    expect(status).toBe(400);
    expect(json).toMatchObject({ error: { type: 'invalid_request_error', param } });
  });

  it('answers 400 to a body that is not multipart', async () => {
    const { status, json } = await post('/v1/audio/transcriptions', { model: 'whisper-1' });
    expect(status).toBe(400);
    expect((json.error as Wire).message).toContain('multipart/form-data');
  });
});

/* ------------------------------------------------------------------ rerank */

const DOCUMENTS = ['Berlin is the capital of Germany.', 'Paris is the capital of France.', 'The Seine flows through Paris, France.', 'Bananas are yellow.'];

describe('POST /v2/rerank (Cohere v2)', () => {
  const rerank = (body: Wire, headers?: Record<string, string>) =>
    post('/v2/rerank', { model: 'rerank-v3.5', query: 'capital of France', documents: DOCUMENTS, ...body }, headers);

  it('scores by query-word overlap, best first, ties by index, with search units', async () => {
    const { status, json } = await rerank({});
    expect(status).toBe(200);
    expect(json).toEqual({
      id: expect.stringMatching(/^rerank-sim-\d+$/),
      results: [
        { index: 1, relevance_score: 1 },
        { index: 0, relevance_score: 2 / 3 },
        { index: 2, relevance_score: 1 / 3 },
        { index: 3, relevance_score: 0 },
      ],
      meta: { api_version: { version: '2' }, billed_units: { search_units: 1 } },
    });
  });

  it('top_n keeps the best n', async () => {
    const { json } = await rerank({ top_n: 2 });
    expect((json.results as WireList).map((r) => r.index)).toEqual([1, 0]);
  });

  it('bills one search unit per 100 chunks, a document over 500 tokens (query included) being several', async () => {
    const short = Array.from({ length: 150 }, (_, i) => `document ${i}`);
    expect((await rerank({ documents: short })).json.meta).toMatchObject({ billed_units: { search_units: 2 } });
    const long = ' word'.repeat(1200); // 1200 tokens: 3 chunks with the query
    expect(countTextTokens(long)).toBe(1200);
    const hundred = [...short.slice(0, 98), long];
    expect((await rerank({ documents: hundred })).json.meta).toMatchObject({ billed_units: { search_units: 2 } });
    // Cut to max_tokens_per_doc, the long document is one chunk again: 99 chunks.
    expect((await rerank({ documents: hundred, max_tokens_per_doc: 400 })).json.meta).toMatchObject({ billed_units: { search_units: 1 } });
  });

  it("answers errors with Cohere's {message} body", async () => {
    const empty = await rerank({ documents: [] });
    expect([empty.status, empty.json]).toEqual([400, { message: 'invalid request: list of documents must not be empty' }]);
    const noAuth = await rerank({}, { 'content-type': 'application/json' });
    expect([noAuth.status, Object.keys(noAuth.json)]).toEqual([401, ['message']]);
    const limited = await rerank({ query: 'q\n#sim {"fail": 429}' });
    expect([limited.status, limited.json]).toEqual([429, { message: expect.stringContaining('simulated failure') }]);
    const failed = await rerank({ query: 'q\n#sim {"fail": 503}' });
    expect([failed.status, Object.keys(failed.json)]).toEqual([503, ['message']]);
    const badDirective = await rerank({ query: 'q\n#sim {"nope": 1}' });
    expect([badDirective.status, badDirective.json.message]).toEqual([400, expect.stringMatching(/^invalid request: #sim: unknown directive/)]);
  });

  it.each([
    [{ query: '' }, 'query'],
    [{ model: '' }, 'model'],
    [{ top_n: 0 }, 'top_n'],
    [{ documents: [{ text: 'objects are Jina, not Cohere v2' }] }, 'documents'],
    [{ max_tokens_per_doc: -1 }, 'max_tokens_per_doc'],
  ])('answers 400 naming the field for %p', async (body, field) => {
    const { status, json } = await rerank(body);
    expect(status).toBe(400);
    expect(json.message).toMatch(new RegExp(`^invalid request: ${field}`));
  });

  it('#sim empty answers no results; the #sim line is not part of the query', async () => {
    expect((await rerank({ query: 'capital of France\n#sim {"empty": true}' })).json.results).toEqual([]);
    const steered = await rerank({ query: 'capital of France\n#sim {"delay_ms": 0}' });
    expect((steered.json.results as WireList)[0]).toEqual({ index: 1, relevance_score: 1 });
  });
});

describe('POST /v1/rerank (Jina)', () => {
  const rerank = (body: Wire) => post('/v1/rerank', { model: 'jina-reranker-v2-base-multilingual', query: 'capital of France', documents: DOCUMENTS, ...body });

  it('answers results with their documents by default, and token usage', async () => {
    const { status, json } = await rerank({ top_n: 2 });
    const tokens = DOCUMENTS.reduce((sum, d) => sum + countTextTokens('capital of France') + countTextTokens(d), 0);
    expect(status).toBe(200);
    expect(json).toEqual({
      model: 'jina-reranker-v2-base-multilingual',
      usage: { total_tokens: tokens, prompt_tokens: tokens },
      results: [
        { index: 1, relevance_score: 1, document: { text: DOCUMENTS[1] } },
        { index: 0, relevance_score: 2 / 3, document: { text: DOCUMENTS[0] } },
      ],
    });
  });

  it('accepts {text} documents, and leaves documents out with return_documents false', async () => {
    const { json } = await rerank({ documents: DOCUMENTS.map((text) => ({ text })), return_documents: false });
    expect(json.results).toEqual([
      { index: 1, relevance_score: 1 },
      { index: 0, relevance_score: 2 / 3 },
      { index: 2, relevance_score: 1 / 3 },
      { index: 3, relevance_score: 0 },
    ]);
  });

  it('answers errors with OpenAI-style bodies, and honours fail and empty', async () => {
    const bad = await rerank({ documents: [{ image: 'https://example.com/x.png' }] });
    expect([bad.status, bad.json]).toEqual([400, openAiError(null, 'documents', 'invalid_request_error')]);
    const failed = await rerank({ query: 'q\n#sim {"fail": 500}' });
    expect([failed.status, failed.json]).toEqual([500, openAiError('sim_failure', null, 'api_error')]);
    expect((await rerank({ query: 'q\n#sim {"empty": true}' })).json.results).toEqual([]);
  });
});

/* ------------------------------------------------------------------ moderations */

describe('POST /v1/moderations', () => {
  const moderate = (body: Wire) => post('/v1/moderations', { model: 'omni-moderation-latest', ...body });
  const KEYS = [
    'harassment',
    'harassment/threatening',
    'hate',
    'hate/threatening',
    'illicit',
    'illicit/violent',
    'self-harm',
    'self-harm/intent',
    'self-harm/instructions',
    'sexual',
    'sexual/minors',
    'violence',
    'violence/graphic',
  ];
  interface Result {
    flagged: boolean;
    categories: Record<string, boolean>;
    category_scores: Record<string, number>;
    category_applied_input_types: Record<string, string[]>;
  }
  const resultsOf = (json: Wire) => json.results as Result[];

  it('flags violence for the word kill, with the 13 categories spelt as on the wire', async () => {
    const { status, json } = await moderate({ input: 'I will kill the process' });
    expect(status).toBe(200);
    expect(json).toMatchObject({ id: expect.stringMatching(/^modr-/), model: 'omni-moderation-latest' });
    const [result] = resultsOf(json);
    expect(MODERATION_CATEGORIES).toEqual(KEYS);
    expect(Object.keys(result.categories)).toEqual(KEYS);
    expect(Object.keys(result.category_scores)).toEqual(KEYS);
    expect(Object.keys(result.category_applied_input_types)).toEqual(KEYS);
    expect(result.flagged).toBe(true);
    expect(
      Object.entries(result.categories)
        .filter(([, v]) => v)
        .map(([k]) => k),
    ).toEqual(['violence']);
    expect(result.category_scores.violence).toBeGreaterThanOrEqual(0.5);
    for (const key of KEYS.filter((k) => k !== 'violence')) expect(result.category_scores[key]).toBeLessThan(0.01);
    expect(Object.values(result.category_applied_input_types).every((t) => t.length === 1 && t[0] === 'text')).toBe(true);
  });

  it('one result per string; whole words only; a sub-category flags its parent', async () => {
    const { json } = await moderate({ input: ['such skills', 'gore everywhere', 'how to SHOPLIFT'] });
    const [clean, graphic, illicit] = resultsOf(json);
    expect(clean.flagged).toBe(false);
    expect(Object.values(clean.categories).some(Boolean)).toBe(false);
    expect(
      Object.entries(graphic.categories)
        .filter(([, v]) => v)
        .map(([k]) => k),
    ).toEqual(['violence', 'violence/graphic']);
    expect(illicit.categories.illicit).toBe(true);
  });

  it('text and image parts get ONE result; images count only for the image-capable categories', async () => {
    const input = [
      { type: 'text', text: 'a calm photo' },
      { type: 'image_url', image_url: { url: 'https://example.com/gore.png' } },
    ];
    const results = resultsOf((await moderate({ input })).json);
    expect(results).toHaveLength(1);
    const [result] = results;
    expect(result.categories['violence/graphic']).toBe(true);
    expect(result.category_applied_input_types.violence).toEqual(['text', 'image']);
    expect(result.category_applied_input_types.sexual).toEqual(['text', 'image']);
    expect(result.category_applied_input_types.hate).toEqual(['text']);
    const imageOnly = resultsOf((await moderate({ input: input.slice(1) })).json)[0];
    expect(imageOnly.category_applied_input_types.hate).toEqual([]);
    expect(imageOnly.category_applied_input_types['self-harm']).toEqual(['image']);
  });

  it('is deterministic, defaults the model, and text-moderation models refuse images', async () => {
    const { json } = await post('/v1/moderations', { input: 'hello' });
    expect(json.model).toBe('omni-moderation-latest');
    expect((await post('/v1/moderations', { input: 'hello' })).json.results).toEqual(json.results);
    const refused = await moderate({ model: 'text-moderation-latest', input: [{ type: 'image_url', image_url: { url: 'https://x/y.png' } }] });
    expect([refused.status, refused.json]).toEqual([400, openAiError(null, 'input', 'invalid_request_error')]);
  });

  it.each([[{}], [{ input: 42 }], [{ input: [] }], [{ input: [{ type: 'audio', audio: 'x' }] }]])('answers 400 naming input for %p', async (body) => {
    const { status, json } = await moderate(body);
    expect([status, json]).toEqual([400, openAiError(null, 'input', 'invalid_request_error')]);
  });

  it('#sim fail, empty; and the directive line is not judged', async () => {
    const failed = await moderate({ input: 'x\n#sim {"fail": 503}' });
    expect([failed.status, failed.json]).toEqual([503, openAiError('sim_failure', null, 'api_error')]);
    expect((await moderate({ input: ['a', 'b\n#sim {"empty": true}'] })).json.results).toEqual([]);
    const steered = resultsOf((await moderate({ input: 'fine\n#sim {"fail_models": {"kill": 500}}' })).json)[0];
    expect(steered.flagged).toBe(false);
  });
});

/* ------------------------------------------------------------------ the official SDK */

describe('through the official openai SDK', () => {
  it('images.generate', async () => {
    const response = await client.images.generate({ model: 'gpt-image-1', prompt: 'a lighthouse', size: '1024x1536', quality: 'low' });
    const png = readPng(Buffer.from(response.data![0].b64_json!, 'base64'));
    expect([png.width, png.height]).toEqual([1024, 1536]);
    expect(response.usage?.output_tokens).toBe(408);
    expect(response.output_format).toBe('png');
  });

  it('audio.speech.create, read with arrayBuffer()', async () => {
    const response = await client.audio.speech.create({ model: 'gpt-4o-mini-tts', voice: 'coral', input: 'Testing the speech route.', response_format: 'wav' });
    const wave = readWav(Buffer.from(await response.arrayBuffer()));
    expect(wave.dataBytes / 2 / 24_000).toBeCloseTo(25 * 0.06, 6);
    const mp3 = await client.audio.speech.create({ model: 'tts-1', voice: 'alloy', input: 'mp3 please' });
    expect(readMp3Frames(Buffer.from(await mp3.arrayBuffer()))[0].layer).toBe(1);
  });

  it('audio.transcriptions.create with toFile, in json, verbose_json and srt', async () => {
    const file = () => toFile(wavWithLines(2, `#sim-text ${SENTENCES}`), 'clip.wav', { type: 'audio/wav' });
    const json = await client.audio.transcriptions.create({ model: 'gpt-4o-mini-transcribe', file: await file() });
    expect(json.text).toBe(SENTENCES);
    expect(json.usage).toMatchObject({ type: 'tokens', input_token_details: { audio_tokens: 20 } });
    const verbose = await client.audio.transcriptions.create({
      model: 'whisper-1',
      file: await file(),
      response_format: 'verbose_json',
      timestamp_granularities: ['word'],
    });
    expect([verbose.duration, verbose.words?.length, verbose.segments]).toEqual([2, SENTENCES.split(' ').length, undefined]);
    const srt = await client.audio.transcriptions.create({ model: 'whisper-1', file: await file(), response_format: 'srt' });
    expect(srt).toMatch(/^1\n00:00:00,000 --> /);
  });

  it('audio.translations.create', async () => {
    const translation = await client.audio.translations.create({
      model: 'whisper-1',
      file: await toFile(wavWithLines(1, '#sim-text Good evening.'), 'clip.wav'),
    });
    expect(translation.text).toBe('Good evening.');
  });

  it('moderations.create', async () => {
    const moderation = await client.moderations.create({ model: 'omni-moderation-latest', input: ['kill it', 'kind words'] });
    expect(moderation.results.map((r) => r.flagged)).toEqual([true, false]);
    expect(moderation.results[0].categories.violence).toBe(true);
    expect(moderation.results[0].category_applied_input_types['violence/graphic']).toEqual(['text']);
  });

  it('raises the status of a simulated failure on a media route', async () => {
    const failing = client.audio.transcriptions.create({ model: 'whisper-1', file: await toFile(wavWithLines(1), 'a.wav'), prompt: '#sim {"fail": 503}' });
    await expect(failing).rejects.toBeInstanceOf(OpenAI.InternalServerError);
    await expect(failing).rejects.toMatchObject({ status: 503, code: 'sim_failure' });
  });
});
