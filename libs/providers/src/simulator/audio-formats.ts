/**
 * Real, decodable audio files built by hand for the simulated speech model, and the little
 * parsing the simulated transcription model needs to know an upload's duration.
 *
 * - WAV / PCM / FLAC carry the samples given (16-bit mono). FLAC uses VERBATIM subframes: valid
 *   and lossless, just not compressed, with the STREAMINFO MD5 filled in so `flac -t` checks it.
 * - MP3 is MPEG-1 Layer III, 48 kHz, 32 kbit/s, mono: frames of 96 bytes whose side information
 *   and main data are all zero, which every decoder renders as 24 ms of silence. Encoding the
 *   tone would need a real encoder; a silent stream of the right length is what tests need.
 * - Opus is Ogg Opus holding 20 ms CELT silence packets (TOC 0xf8, then 0xff 0xfe), with the
 *   granule positions giving the exact duration.
 */
import { createHash } from 'node:crypto';

export const SPEECH_SAMPLE_RATE = 24_000;

/** A quiet 440 Hz tone (-20 dBFS) of `count` samples, faded in and out over 10 ms against clicks. */
export function tone(count: number, sampleRate = SPEECH_SAMPLE_RATE): Int16Array {
  const fade = Math.round(sampleRate / 100);
  return Int16Array.from({ length: count }, (_, i) => {
    const envelope = Math.min(1, i / fade, (count - 1 - i) / fade);
    return Math.round(3277 * envelope * Math.sin((2 * Math.PI * 440 * i) / sampleRate));
  });
}

/** Raw signed 16-bit little-endian samples: OpenAI's `pcm` format. */
export function pcm(samples: Int16Array): Buffer {
  const out = Buffer.alloc(samples.length * 2);
  samples.forEach((s, i) => out.writeInt16LE(s, i * 2));
  return out;
}

/** RIFF/WAVE, PCM 16-bit mono. */
export function wav(samples: Int16Array, sampleRate = SPEECH_SAMPLE_RATE): Buffer {
  const data = pcm(samples);
  const header = Buffer.alloc(44);
  header.write('RIFF', 0, 'latin1');
  header.writeUInt32LE(36 + data.length, 4);
  header.write('WAVE', 8, 'latin1');
  header.write('fmt ', 12, 'latin1');
  header.writeUInt32LE(16, 16); // fmt chunk size
  header.writeUInt16LE(1, 20); // PCM
  header.writeUInt16LE(1, 22); // channels
  header.writeUInt32LE(sampleRate, 24);
  header.writeUInt32LE(sampleRate * 2, 28); // byte rate
  header.writeUInt16LE(2, 32); // block align
  header.writeUInt16LE(16, 34); // bits per sample
  header.write('data', 36, 'latin1');
  header.writeUInt32LE(data.length, 40);
  return Buffer.concat([header, data]);
}

/** MPEG-1 Layer III frame header: no CRC; 32 kbit/s, 48 kHz, no padding; mono. */
export const MP3_FRAME_HEADER = Buffer.from([0xff, 0xfb, 0x14, 0xc0]);
export const MP3_FRAME_BYTES = 96; // 144 * 32000 / 48000
export const MP3_FRAME_SECONDS = 1152 / 48_000;

/** Silent MP3 frames covering `seconds` (rounded up to whole 24 ms frames). */
export function silentMp3(seconds: number): Buffer {
  const frame = Buffer.alloc(MP3_FRAME_BYTES);
  MP3_FRAME_HEADER.copy(frame);
  const count = Math.ceil(seconds / MP3_FRAME_SECONDS - 1e-9);
  return Buffer.concat(Array.from({ length: count }, () => frame));
}

/* ---------------------------------------------------------------- FLAC */

const FLAC_BLOCK = 4096;
const FLAC_BLOCK_CODE = 12; // 256 * 2^(12-8) = 4096
const FLAC_BLOCK_CODE_16BIT = 7; // block size - 1 follows the frame number in 16 bits
const FLAC_RATE_CODES: Record<number, number> = { 8000: 4, 16_000: 5, 22_050: 6, 24_000: 7, 32_000: 8, 44_100: 9, 48_000: 10 };

/** CRC of the given width, MSB first, initial value 0: FLAC's CRC-8 (0x07) and CRC-16 (0x8005). */
function crcMsb(bytes: Uint8Array, polynomial: number, width: 8 | 16): number {
  const top = 1 << (width - 1);
  const mask = (1 << width) - 1;
  let crc = 0;
  for (const byte of bytes) {
    crc ^= byte << (width - 8);
    for (let k = 0; k < 8; k++) crc = crc & top ? ((crc << 1) ^ polynomial) & mask : (crc << 1) & mask;
  }
  return crc;
}

/** FLAC's "UTF-8" coding of a frame number (the UTF-8 scheme extended past 0x10ffff). */
export function flacUtf8(value: number): Buffer {
  if (value < 0x80) return Buffer.from([value]);
  const continuation: number[] = [];
  let rest = value;
  // With k continuation bytes the leading byte keeps 6 - k bits of its own.
  do {
    continuation.unshift(0x80 | (rest & 0x3f));
    rest = Math.floor(rest / 64);
  } while (rest >= 1 << (6 - continuation.length));
  const lead = (0xff << (7 - continuation.length)) & 0xff;
  return Buffer.from([lead | rest, ...continuation]);
}

function flacFrame(block: Int16Array, frameNumber: number, sampleRate: number): Buffer {
  const full = block.length === FLAC_BLOCK;
  const header = [
    Buffer.from([0xff, 0xf8, ((full ? FLAC_BLOCK_CODE : FLAC_BLOCK_CODE_16BIT) << 4) | FLAC_RATE_CODES[sampleRate], 0x08]), // mono, 16 bits
    flacUtf8(frameNumber),
  ];
  if (!full) header.push(Buffer.from([(block.length - 1) >> 8, (block.length - 1) & 0xff]));
  const head = Buffer.concat(header);
  const subframe = Buffer.alloc(1 + block.length * 2);
  subframe[0] = 0x02; // zero pad bit, type VERBATIM (000001), no wasted bits
  block.forEach((s, i) => subframe.writeInt16BE(s, 1 + i * 2));
  const body = Buffer.concat([head, Buffer.from([crcMsb(head, 0x07, 8)]), subframe]);
  const crc = crcMsb(body, 0x8005, 16);
  return Buffer.concat([body, Buffer.from([crc >> 8, crc & 0xff])]);
}

/** A FLAC stream: marker, STREAMINFO (the only, so last, metadata block), then the frames. */
export function flac(samples: Int16Array, sampleRate = SPEECH_SAMPLE_RATE): Buffer {
  const frames: Buffer[] = [];
  for (let start = 0; start < samples.length; start += FLAC_BLOCK) {
    frames.push(flacFrame(samples.subarray(start, start + FLAC_BLOCK), frames.length, sampleRate));
  }
  const info = Buffer.alloc(4 + 34);
  info[0] = 0x80; // last metadata block, type 0 (STREAMINFO)
  info.writeUIntBE(34, 1, 3);
  info.writeUInt16BE(FLAC_BLOCK, 4);
  info.writeUInt16BE(FLAC_BLOCK, 6);
  info.writeUIntBE(frames.length ? Math.min(...frames.map((f) => f.length)) : 0, 8, 3);
  info.writeUIntBE(frames.length ? Math.max(...frames.map((f) => f.length)) : 0, 11, 3);
  // 20 bits sample rate, 3 bits channels - 1, 5 bits bits-per-sample - 1, 36 bits total samples
  info.writeBigUInt64BE((BigInt(sampleRate) << 44n) | (0n << 41n) | (15n << 36n) | BigInt(samples.length), 14);
  createHash('md5').update(pcm(samples)).digest().copy(info, 22);
  return Buffer.concat([Buffer.from('fLaC', 'latin1'), info, ...frames]);
}

/* ---------------------------------------------------------------- Ogg Opus */

const OPUS_SILENCE = Buffer.from([0xf8, 0xff, 0xfe]);
const OPUS_FRAME_48K = 960; // 20 ms
const OPUS_PRE_SKIP = 312; // what libopus's encoder reports; decoders drop these samples
const OGG_PACKETS_PER_PAGE = 50; // one second a page
const OGG_SERIAL = 0x53494d31; // fixed, so the bytes are deterministic

/** Ogg's CRC-32: polynomial 0x04c11db7, MSB first, no reflection, no final xor. */
const OGG_CRC_TABLE = Uint32Array.from({ length: 256 }, (_, n) => {
  let c = n << 24;
  for (let k = 0; k < 8; k++) c = c & 0x80000000 ? (c << 1) ^ 0x04c11db7 : c << 1;
  return c >>> 0;
});

export function oggCrc(bytes: Uint8Array): number {
  let crc = 0;
  for (const byte of bytes) crc = ((crc << 8) ^ OGG_CRC_TABLE[((crc >>> 24) ^ byte) & 0xff]) >>> 0;
  return crc;
}

/** One Ogg page of whole packets (each shorter than 255 bytes, so one lacing value each). */
function oggPage(packets: Buffer[], granule: bigint, sequence: number, flags: number): Buffer {
  const header = Buffer.alloc(27 + packets.length);
  header.write('OggS', 0, 'latin1');
  header[5] = flags;
  header.writeBigInt64LE(granule, 6);
  header.writeUInt32LE(OGG_SERIAL, 14);
  header.writeUInt32LE(sequence, 18);
  header[26] = packets.length;
  packets.forEach((p, i) => (header[27 + i] = p.length));
  const page = Buffer.concat([header, ...packets]);
  page.writeUInt32LE(oggCrc(page), 22);
  return page;
}

/** Ogg Opus of `seconds` of silence; the last granule position trims it to the exact length. */
export function silentOpus(seconds: number, inputSampleRate = SPEECH_SAMPLE_RATE): Buffer {
  const head = Buffer.alloc(19);
  head.write('OpusHead', 0, 'latin1');
  head[8] = 1; // version
  head[9] = 1; // channels
  head.writeUInt16LE(OPUS_PRE_SKIP, 10);
  head.writeUInt32LE(inputSampleRate, 12);
  // output gain 0, channel mapping family 0: bytes 16-18 stay zero
  const vendor = Buffer.from('svc-gateway simulator', 'latin1');
  const tags = Buffer.concat([Buffer.from('OpusTags', 'latin1'), Buffer.alloc(4), vendor, Buffer.alloc(4)]);
  tags.writeUInt32LE(vendor.length, 8);

  // Granule positions count decoded samples, the pre-skip ones included (RFC 7845 section 4).
  const decoded = seconds > 0 ? OPUS_PRE_SKIP + Math.round(seconds * 48_000) : 0;
  const packets = Math.ceil(decoded / OPUS_FRAME_48K);
  const pages = [oggPage([head], 0n, 0, 0x02), oggPage([tags], 0n, 1, packets === 0 ? 0x04 : 0)];
  for (let first = 0; first < packets; first += OGG_PACKETS_PER_PAGE) {
    const count = Math.min(OGG_PACKETS_PER_PAGE, packets - first);
    const last = first + count === packets;
    const granule = last ? decoded : (first + count) * OPUS_FRAME_48K;
    pages.push(
      oggPage(
        Array.from({ length: count }, () => OPUS_SILENCE),
        BigInt(granule),
        pages.length,
        last ? 0x04 : 0,
      ),
    );
  }
  return Buffer.concat(pages);
}
