/**
 * A minimal PNG encoder (8-bit truecolour, no interlace) for the simulated image model. Node 20
 * has no zlib.crc32 (it came in 22.2), so the chunk CRC is computed here; deflate is zlib's,
 * which is deterministic for the same input and options, so the same pixels give the same bytes.
 */
import { deflateSync } from 'node:zlib';

export const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/** PNG's CRC-32 (ISO 3309, reflected polynomial 0xedb88320), one table for all calls. */
const CRC_TABLE = Uint32Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});

export function crc32(...parts: Uint8Array[]): number {
  let c = 0xffffffff;
  for (const part of parts) for (const byte of part) c = CRC_TABLE[(c ^ byte) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

/** One chunk: length, type, data, and the CRC over type and data. */
export function pngChunk(type: string, data: Uint8Array): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, 'latin1');
  const tail = Buffer.alloc(4);
  tail.writeUInt32BE(crc32(head.subarray(4), data), 0);
  return Buffer.concat([head, data, tail]);
}

export type Rgb = readonly [number, number, number];

/**
 * A PNG of `width` x `height` pixels, the colour of each row given by `rowColour` (images of
 * horizontal bands). Every row is stored with filter 1 (Sub): one pixel of colour, then zero
 * differences, which deflate shrinks to a few bytes a row even at 2048 pixels wide.
 */
export function encodePng(width: number, height: number, rowColour: (y: number) => Rgb): Buffer {
  const stride = 1 + 3 * width;
  const raw = Buffer.alloc(stride * height); // zero-filled: the Sub differences of a flat row
  for (let y = 0; y < height; y++) {
    const at = y * stride;
    raw[at] = 1;
    const [r, g, b] = rowColour(y);
    raw[at + 1] = r;
    raw[at + 2] = g;
    raw[at + 3] = b;
  }
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 2; // colour type: truecolour
  // compression 0, filter method 0, interlace 0: bytes 10-12 stay zero
  return Buffer.concat([PNG_SIGNATURE, pngChunk('IHDR', ihdr), pngChunk('IDAT', deflateSync(raw, { level: 9 })), pngChunk('IEND', Buffer.alloc(0))]);
}
