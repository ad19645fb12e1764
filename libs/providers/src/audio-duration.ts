/**
 * How long an audio file plays, read from its own headers: what transcription is billed on
 * (spec 1: per second) when the provider does not say, and what bounds the hold before the call.
 */

export interface WavInfo {
  sampleRate: number;
  channels: number;
  bitsPerSample: number;
  dataBytes: number;
  seconds: number;
}

/** The format of a RIFF/WAVE file, walking its chunks; null when it is not one. */
export function parseWav(bytes: Buffer): WavInfo | null {
  if (bytes.length < 12 || bytes.toString('latin1', 0, 4) !== 'RIFF' || bytes.toString('latin1', 8, 12) !== 'WAVE') return null;
  let format: Omit<WavInfo, 'dataBytes' | 'seconds'> | null = null;
  for (let at = 12; at + 8 <= bytes.length;) {
    const id = bytes.toString('latin1', at, at + 4);
    const size = bytes.readUInt32LE(at + 4);
    if (id === 'fmt ' && at + 24 <= bytes.length) {
      format = { channels: bytes.readUInt16LE(at + 10), sampleRate: bytes.readUInt32LE(at + 12), bitsPerSample: bytes.readUInt16LE(at + 22) };
    }
    if (id === 'data' && format) {
      // A streamed WAV may say 0 or 0xffffffff here; what was uploaded is what there is.
      const dataBytes = Math.min(size, bytes.length - at - 8);
      const frameBytes = format.channels * Math.ceil(format.bitsPerSample / 8);
      return { ...format, dataBytes, seconds: frameBytes && format.sampleRate ? dataBytes / frameBytes / format.sampleRate : 0 };
    }
    at += 8 + size + (size % 2); // chunks are padded to an even size
  }
  return null;
}

const MPEG1_L3_KBPS = [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320];
const MPEG1_RATES = [44_100, 48_000, 32_000];

/**
 * The duration of an MPEG-1 Layer III stream, walking its frame headers (after an ID3v2 tag,
 * if any); null when the bytes do not start with such frames.
 */
export function mp3Seconds(bytes: Buffer): number | null {
  let at = 0;
  if (bytes.toString('latin1', 0, 3) === 'ID3' && bytes.length >= 10) {
    at = 10 + (((bytes[6] & 0x7f) << 21) | ((bytes[7] & 0x7f) << 14) | ((bytes[8] & 0x7f) << 7) | (bytes[9] & 0x7f));
  }
  let seconds = 0;
  let frames = 0;
  while (at + 4 <= bytes.length && bytes[at] === 0xff && (bytes[at + 1] & 0xfe) === 0xfa) {
    const kbps = MPEG1_L3_KBPS[bytes[at + 2] >> 4];
    const rate = MPEG1_RATES[(bytes[at + 2] >> 2) & 3];
    if (!kbps || !rate) break;
    at += Math.floor((144_000 * kbps) / rate) + ((bytes[at + 2] >> 1) & 1);
    seconds += 1152 / rate;
    frames++;
  }
  return frames > 0 ? seconds : null;
}

/**
 * The bitrate assumed for a file whose length cannot be read from its headers (neither WAV nor
 * MP3): 16 kbit/s, below what speech codecs are used at, so the duration it gives is an upper
 * bound for ordinary files and the hold a true worst case.
 */
export const UNKNOWN_FORMAT_BYTES_PER_SECOND = 2_000;

/** Seconds of audio: exact for WAV and MP3, else the bound above. */
export function audioSeconds(bytes: Buffer, unknownBytesPerSecond = UNKNOWN_FORMAT_BYTES_PER_SECOND): number {
  return parseWav(bytes)?.seconds ?? mp3Seconds(bytes) ?? bytes.length / unknownBytesPerSecond;
}
