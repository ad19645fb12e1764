/**
 * A minimal baseline JPEG (JFIF) encoder for the simulated video model's thumbnails. The picture
 * is made of flat 8x8 blocks, 4:4:4, so every block is its DC coefficient alone and the encoder
 * needs no DCT: a flat block of value v has DC 8(v - 128) (ITU-T T.81 A.3.3), which a
 * quantiser of 8 turns into exactly v - 128, and a decoder back into exactly v. Every AC run is
 * one end-of-block code.
 *
 * References: ITU-T T.81 (JPEG) B.2 (markers and segments), F.1.2.1 (DC difference coding),
 * K.3.1 (the standard luminance DC Huffman table, used for all three components), and JFIF 1.02.
 */

export type Rgb = readonly [number, number, number];

export const JPEG_SOI = Buffer.from([0xff, 0xd8, 0xff]);

/** T.81 Table K.3: code lengths 1-16 of the luminance DC table, for categories 0-11. */
const DC_BITS = [0, 1, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0];
const DC_VALUES = Array.from({ length: 12 }, (_, i) => i);
/** The one AC symbol ever written: end of block (0x00), as a 1-bit code. */
const AC_BITS = [1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
const AC_VALUES = [0x00];
/** A DC-only block of value v quantised by 8 is v - 128, always in -128..127: category 8 at most. */
const QUANTISER = 8;

/** Canonical Huffman codes from code lengths (T.81 C.2), by symbol. */
function huffmanCodes(bits: readonly number[], values: readonly number[]): Map<number, { code: number; length: number }> {
  const codes = new Map<number, { code: number; length: number }>();
  let code = 0;
  let k = 0;
  for (let length = 1; length <= 16; length++) {
    for (let i = 0; i < bits[length - 1]; i++) codes.set(values[k++], { code: code++, length });
    code <<= 1;
  }
  return codes;
}

const DC_CODES = huffmanCodes(DC_BITS, DC_VALUES);
const EOB = huffmanCodes(AC_BITS, AC_VALUES).get(0x00)!;

/** Entropy-coded bits, with a 0x00 stuffed after every 0xFF byte (T.81 F.1.2.3) and 1-bits padding the last byte. */
class EntropyWriter {
  private readonly bytes: number[] = [];
  private current = 0;
  private used = 0;

  bits(value: number, count: number): void {
    for (let i = count - 1; i >= 0; i--) {
      this.current = (this.current << 1) | ((value >>> i) & 1);
      if (++this.used === 8) this.flush();
    }
  }

  finish(): Buffer {
    if (this.used > 0) this.bits(0xff, 8 - this.used);
    return Buffer.from(this.bytes);
  }

  private flush(): void {
    this.bytes.push(this.current);
    if (this.current === 0xff) this.bytes.push(0x00);
    this.current = 0;
    this.used = 0;
  }
}

/** JFIF's full-range YCbCr. */
function toYCbCr([r, g, b]: Rgb): [number, number, number] {
  const clamp = (v: number) => Math.min(255, Math.max(0, Math.round(v)));
  return [clamp(0.299 * r + 0.587 * g + 0.114 * b), clamp(128 - 0.168736 * r - 0.331264 * g + 0.5 * b), clamp(128 + 0.5 * r - 0.418688 * g - 0.081312 * b)];
}

function segment(marker: number, ...payload: Uint8Array[]): Buffer {
  const length = 2 + payload.reduce((n, p) => n + p.length, 0);
  return Buffer.concat([Buffer.from([0xff, marker, length >> 8, length & 0xff]), ...payload]);
}

/**
 * A `width` x `height` JPEG whose 8x8 block at (bx, by) has the colour `blockColour(bx, by)`
 * (blocks past the right or bottom edge are coded too, as T.81 wants, and cut by the decoder).
 */
export function encodeJpeg(width: number, height: number, blockColour: (bx: number, by: number) => Rgb): Buffer {
  const blocksX = Math.ceil(width / 8);
  const blocksY = Math.ceil(height / 8);
  const out = new EntropyWriter();
  const previous = [0, 0, 0];
  for (let by = 0; by < blocksY; by++) {
    for (let bx = 0; bx < blocksX; bx++) {
      const components = toYCbCr(blockColour(bx, by));
      for (let c = 0; c < 3; c++) {
        const level = Math.round(((components[c] - 128) * 8) / QUANTISER);
        const diff = level - previous[c];
        previous[c] = level;
        const category = diff === 0 ? 0 : 32 - Math.clz32(Math.abs(diff));
        const { code, length } = DC_CODES.get(category)!;
        out.bits(code, length);
        // A negative difference is sent as its one's complement in `category` bits (F.1.2.1.1).
        if (category > 0) out.bits(diff > 0 ? diff : diff + (1 << category) - 1, category);
        out.bits(EOB.code, EOB.length);
      }
    }
  }
  const component = (id: number) => [id, 0x11 /* no subsampling */, 0 /* quantisation table 0 */];
  return Buffer.concat([
    Buffer.from([0xff, 0xd8]), // SOI
    segment(0xe0, Buffer.from('JFIF\0', 'latin1'), Buffer.from([1, 2, 0, 0, 1, 0, 1, 0, 0])), // APP0: 1.02, aspect 1:1, no thumbnail
    segment(0xdb, Buffer.from([0x00]), Buffer.alloc(64, QUANTISER)), // DQT 0, 8-bit
    segment(0xc0, Buffer.from([8, height >> 8, height & 0xff, width >> 8, width & 0xff, 3, ...component(1), ...component(2), ...component(3)])), // SOF0
    segment(0xc4, Buffer.from([0x00, ...DC_BITS, ...DC_VALUES]), Buffer.from([0x10, ...AC_BITS, ...AC_VALUES])), // DHT: DC 0, AC 0
    segment(0xda, Buffer.from([3, 1, 0x00, 2, 0x00, 3, 0x00, 0, 63, 0])), // SOS: all components on tables 0, spectral 0-63
    out.finish(),
    Buffer.from([0xff, 0xd9]), // EOI
  ]);
}
