/**
 * The simulated video model's files, read back by readers written here from the standards, not
 * from the encoders: the MP4's boxes (ISO/IEC 14496-12), its H.264 parameter sets and pictures
 * (ITU-T H.264, down to the I_PCM samples), and the JPEG's segments and DC coefficients (T.81).
 */
import { encodeJpeg, type Rgb } from './jpeg';
import { encodeClip, FPS, pictureSize, rgbToYuv601Limited, type Yuv } from './mp4';

/* ------------------------------------------------------------------ ISO BMFF reading */

interface Box {
  type: string;
  /** The payload, after the 8-byte header. */
  body: Buffer;
  children: Box[];
}

const CONTAINERS = new Set(['moov', 'trak', 'mdia', 'minf', 'dinf', 'stbl']);

function boxes(bytes: Buffer): Box[] {
  const out: Box[] = [];
  let at = 0;
  while (at < bytes.length) {
    const size = bytes.readUInt32BE(at);
    expect(size).toBeGreaterThanOrEqual(8);
    expect(at + size).toBeLessThanOrEqual(bytes.length);
    const type = bytes.toString('latin1', at + 4, at + 8);
    const body = bytes.subarray(at + 8, at + size);
    out.push({ type, body, children: CONTAINERS.has(type) ? boxes(body) : [] });
    at += size;
  }
  return out;
}

function find(tree: Box[], path: string): Box {
  const [first, ...rest] = path.split('/');
  const box = tree.find((b) => b.type === first);
  if (!box) throw new Error(`no ${first} box (path ${path})`);
  return rest.length === 0 ? box : find(box.children, rest.join('/'));
}

/* ------------------------------------------------------------------ H.264 reading */

/** The RBSP of a NAL unit's payload: every 0x000003 loses its 03 (H.264 7.4.1). */
function rbspOf(payload: Buffer): Buffer {
  const out: number[] = [];
  let zeros = 0;
  for (const byte of payload) {
    if (zeros >= 2 && byte === 3) {
      zeros = 0;
      continue;
    }
    out.push(byte);
    zeros = byte === 0 ? zeros + 1 : 0;
  }
  return Buffer.from(out);
}

class BitReader {
  private at = 0;
  constructor(private readonly bytes: Buffer) {}
  bit(): number {
    const bit = (this.bytes[this.at >> 3] >> (7 - (this.at & 7))) & 1;
    this.at++;
    return bit;
  }
  u(n: number): number {
    let v = 0;
    for (let i = 0; i < n; i++) v = v * 2 + this.bit();
    return v;
  }
  ue(): number {
    let zeros = 0;
    while (this.bit() === 0) zeros++;
    return 2 ** zeros - 1 + this.u(zeros);
  }
  se(): number {
    const k = this.ue();
    return k % 2 === 1 ? (k + 1) / 2 : -k / 2;
  }
  align(): void {
    while (this.at % 8 !== 0) expect(this.bit()).toBe(0);
  }
  bytesOf(n: number): Buffer {
    expect(this.at % 8).toBe(0);
    const out = this.bytes.subarray(this.at / 8, this.at / 8 + n);
    this.at += 8 * n;
    return out;
  }
  /** more_rbsp_data() is false: what is left is the stop bit and zero padding. */
  expectTrailing(): void {
    expect(this.bit()).toBe(1);
    while (this.at < this.bytes.length * 8) expect(this.bit()).toBe(0);
  }
  get moreData(): boolean {
    const rest = this.bytes.length * 8 - this.at;
    if (rest > 8) return true;
    // Exactly the stop bit and padding left?
    const copy = new BitReader(this.bytes);
    copy.at = this.at;
    if (copy.bit() !== 1) return true;
    while (copy.at < this.bytes.length * 8) if (copy.bit() !== 0) return true;
    return false;
  }
}

interface Sps {
  profile: number;
  constraints: number;
  level: number;
  log2MaxFrameNum: number;
  pocType: number;
  mbWidth: number;
  mbHeight: number;
  width: number;
  height: number;
}

function readSps(nal: Buffer): Sps {
  expect(nal[0] & 0x1f).toBe(7);
  const r = new BitReader(rbspOf(nal.subarray(1)));
  const profile = r.u(8);
  const constraints = r.u(8);
  const level = r.u(8);
  expect(r.ue()).toBe(0); // sps id
  const log2MaxFrameNum = r.ue() + 4;
  const pocType = r.ue();
  expect(pocType).toBe(2); // nothing else is read for it
  expect(r.ue()).toBe(1); // max_num_ref_frames
  r.bit(); // gaps
  const mbWidth = r.ue() + 1;
  const mbHeight = r.ue() + 1;
  expect(r.bit()).toBe(1); // frame_mbs_only
  r.bit(); // direct_8x8_inference
  let [left, right, top, bottom] = [0, 0, 0, 0];
  if (r.bit()) [left, right, top, bottom] = [r.ue(), r.ue(), r.ue(), r.ue()];
  expect(r.bit()).toBe(0); // no VUI
  r.expectTrailing();
  return {
    profile,
    constraints,
    level,
    log2MaxFrameNum,
    pocType,
    mbWidth,
    mbHeight,
    width: mbWidth * 16 - 2 * (left + right),
    height: mbHeight * 16 - 2 * (top + bottom),
  };
}

interface DecodedPicture {
  nalType: number;
  frameNum: number;
  /** The I_PCM macroblocks by address: 384 samples each. */
  pcm: Map<number, Buffer>;
}

/** A slice of the stream the encoder writes: the header, then I_PCM macroblocks and skip runs. */
function readPicture(nal: Buffer, sps: Sps): DecodedPicture {
  const nalType = nal[0] & 0x1f;
  const r = new BitReader(rbspOf(nal.subarray(1)));
  expect(r.ue()).toBe(0); // first_mb_in_slice
  const sliceType = r.ue();
  expect(r.ue()).toBe(0); // pps id
  const frameNum = r.u(sps.log2MaxFrameNum);
  const idr = nalType === 5;
  if (idr) {
    expect(sliceType % 5).toBe(2); // I
    r.ue(); // idr_pic_id
    r.u(2); // no_output_of_prior_pics, long_term_reference
  } else {
    expect(sliceType % 5).toBe(0); // P
    expect(r.u(3)).toBe(0); // no override, no list modification, sliding window
  }
  r.se(); // slice_qp_delta
  expect(r.ue()).toBe(1); // deblocking off
  const total = sps.mbWidth * sps.mbHeight;
  const pcm = new Map<number, Buffer>();
  let address = 0;
  const macroblock = (iPcmType: number) => {
    expect(r.ue()).toBe(iPcmType);
    r.align();
    pcm.set(address++, Buffer.from(r.bytesOf(384)));
  };
  if (idr) while (address < total) macroblock(25);
  else {
    for (;;) {
      address += r.ue(); // mb_skip_run
      if (!r.moreData) break;
      macroblock(30);
      if (!r.moreData) break;
    }
  }
  r.expectTrailing();
  expect(address).toBeLessThanOrEqual(total);
  return { nalType, frameNum, pcm };
}

/* ------------------------------------------------------------------ the clip */

const gradient = (y: number): Yuv => rgbToYuv601Limited(200 - y, 40 + y, 90);
const BAR = rgbToYuv601Limited(255, 255, 255);
const clip = (width: number, height: number, seconds: number) => encodeClip({ width, height, seconds, background: gradient, bar: BAR });

interface ReadClip {
  top: Box[];
  sps: Sps;
  timescale: number;
  movieSeconds: number;
  mediaSeconds: number;
  tkhd: { width: number; height: number };
  entry: { width: number; height: number };
  samples: Buffer[];
}

function readClip(bytes: Buffer): ReadClip {
  const top = boxes(bytes);
  expect(top.map((b) => b.type)).toEqual(['ftyp', 'moov', 'mdat']);
  const ftyp = find(top, 'ftyp').body;
  expect(ftyp.toString('latin1', 0, 4)).toBe('isom');
  expect(ftyp.toString('latin1', 8)).toContain('avc1');

  const mvhd = find(top, 'moov/mvhd').body;
  const movieSeconds = mvhd.readUInt32BE(16) / mvhd.readUInt32BE(12);
  const tkhd = find(top, 'moov/trak/tkhd').body;
  expect(tkhd.readUInt32BE(0) & 0xffffff).toBe(3); // enabled, in movie
  const mdhd = find(top, 'moov/trak/mdia/mdhd').body;
  const timescale = mdhd.readUInt32BE(12);
  expect(find(top, 'moov/trak/mdia/hdlr').body.toString('latin1', 8, 12)).toBe('vide');

  const stbl = 'moov/trak/mdia/minf/stbl';
  const stsd = find(top, `${stbl}/stsd`).body;
  expect(stsd.readUInt32BE(4)).toBe(1);
  const [avc1] = boxes(stsd.subarray(8));
  expect(avc1.type).toBe('avc1');
  const [avcC] = boxes(avc1.body.subarray(78));
  expect(avcC.type).toBe('avcC');
  const c = avcC.body;
  expect([c[0], c[4] & 3, c[5] & 0x1f]).toEqual([1, 3, 1]); // version 1, 4-byte lengths, one SPS
  const spsLength = c.readUInt16BE(6);
  const sps = readSps(c.subarray(8, 8 + spsLength));
  expect([c[1], c[2], c[3]]).toEqual([sps.profile, sps.constraints, sps.level]);
  expect(c[8 + spsLength]).toBe(1); // one PPS
  const pps = c.subarray(11 + spsLength, 11 + spsLength + c.readUInt16BE(9 + spsLength));
  expect(pps[0] & 0x1f).toBe(8);

  const stts = find(top, `${stbl}/stts`).body;
  let ticks = 0;
  let counted = 0;
  for (let i = 0; i < stts.readUInt32BE(4); i++) {
    counted += stts.readUInt32BE(8 + 8 * i);
    ticks += stts.readUInt32BE(8 + 8 * i) * stts.readUInt32BE(12 + 8 * i);
  }
  const stsz = find(top, `${stbl}/stsz`).body;
  expect(stsz.readUInt32BE(4)).toBe(0); // sizes vary
  const count = stsz.readUInt32BE(8);
  expect(counted).toBe(count);
  const sizes = Array.from({ length: count }, (_, i) => stsz.readUInt32BE(12 + 4 * i));
  const stsc = find(top, `${stbl}/stsc`).body;
  expect([stsc.readUInt32BE(4), stsc.readUInt32BE(8), stsc.readUInt32BE(12)]).toEqual([1, 1, count]);
  const stco = find(top, `${stbl}/stco`).body;
  expect(stco.readUInt32BE(4)).toBe(1);
  const offset = stco.readUInt32BE(8);
  // The one chunk starts right after mdat's header and fills it.
  const mdatAt = bytes.length - find(top, 'mdat').body.length;
  expect(offset).toBe(mdatAt);
  expect(sizes.reduce((a, b) => a + b, 0)).toBe(find(top, 'mdat').body.length);
  const stss = find(top, `${stbl}/stss`).body;
  expect([stss.readUInt32BE(4), stss.readUInt32BE(8)]).toEqual([1, 1]);

  const samples: Buffer[] = [];
  let at = offset;
  for (const size of sizes) {
    const sample = bytes.subarray(at, at + size);
    expect(sample.readUInt32BE(0)).toBe(size - 4); // one length-prefixed NAL unit a sample
    samples.push(sample.subarray(4));
    at += size;
  }
  return {
    top,
    sps,
    timescale,
    movieSeconds,
    mediaSeconds: ticks / timescale,
    tkhd: { width: tkhd.readUInt32BE(76) / 65536, height: tkhd.readUInt32BE(80) / 65536 },
    entry: { width: avc1.body.readUInt16BE(24), height: avc1.body.readUInt16BE(26) },
    samples,
  };
}

describe('MP4 clips', () => {
  it('keep the asked ratio at a small picture, both sides even', () => {
    expect(pictureSize(1280, 720)).toEqual({ width: 128, height: 72 });
    expect(pictureSize(720, 1280)).toEqual({ width: 72, height: 128 });
    expect(pictureSize(1792, 1024)).toEqual({ width: 128, height: 74 });
    expect(pictureSize(1, 1)).toEqual({ width: 128, height: 128 });
    expect(pictureSize(21, 9)).toEqual({ width: 128, height: 54 });
  });

  it.each([
    [128, 72, 4],
    [72, 128, 8],
    [128, 74, 12],
    [128, 128, 1],
  ])('%ix%i, %is: a well-formed ISO BMFF file with one Constrained Baseline H.264 track of that size and duration', (width, height, seconds) => {
    const bytes = clip(width, height, seconds);
    expect(bytes.length).toBeLessThan(30_000);
    const read = readClip(bytes);
    expect(read.sps).toMatchObject({ profile: 66, level: 30, width, height });
    expect(read.sps.constraints & 0xc0).toBe(0xc0); // constraint_set0 and 1: Constrained Baseline
    expect(read.tkhd).toEqual({ width, height });
    expect(read.entry).toEqual({ width, height });
    expect(read.movieSeconds).toBe(seconds);
    expect(read.mediaSeconds).toBe(seconds);
    expect(read.samples).toHaveLength(seconds * FPS);
  });

  it('decodes to the background, with a progress bar that fills the last whole macroblock row over the clip', () => {
    const [width, height, seconds] = [128, 72, 2];
    const read = readClip(clip(width, height, seconds));
    const pictures = read.samples.map((nal) => readPicture(nal, read.sps));
    expect(pictures[0]).toMatchObject({ nalType: 5, frameNum: 0 });
    expect(pictures[0].pcm.size).toBe(read.sps.mbWidth * read.sps.mbHeight);
    expect(pictures.slice(1).every((p, i) => p.nalType === 1 && p.frameNum === i + 1)).toBe(true);

    // The IDR picture: every row the gradient's colour, no bar yet.
    const mbWidth = read.sps.mbWidth;
    for (const [address, samples] of pictures[0].pcm) {
      const mbY = Math.floor(address / mbWidth);
      for (let y = 0; y < 16; y++) {
        const row = Math.min(mbY * 16 + y, height - 1);
        expect({ address, y, luma: [...samples.subarray(y * 16, y * 16 + 16)] }).toEqual({ address, y, luma: Array(16).fill(gradient(row)[0]) });
      }
      for (let y = 0; y < 8; y++) {
        const [, cb, cr] = gradient(Math.min(mbY * 16 + 2 * y, height - 1));
        expect([...samples.subarray(256 + y * 8, 264 + y * 8), ...samples.subarray(320 + y * 8, 328 + y * 8)]).toEqual([
          ...Array(8).fill(cb),
          ...Array(8).fill(cr),
        ]);
      }
    }

    // Later pictures code only the bar's new macroblocks, left to right, each once.
    const barRow = Math.floor(height / 16) - 1;
    const coded = pictures.slice(1).flatMap((p) => [...p.pcm.keys()]);
    expect(coded).toEqual(Array.from({ length: mbWidth }, (_, x) => barRow * mbWidth + x));
    expect(pictures.at(-1)!.pcm.size).toBe(1); // the bar is full on the last picture
    for (const picture of pictures.slice(1)) {
      for (const samples of picture.pcm.values()) {
        // Top half the background, bottom half the bar, in every sample.
        for (let y = 0; y < 16; y++) {
          const want = y < 8 ? gradient(barRow * 16 + y) : BAR;
          expect({ y, luma: [...samples.subarray(y * 16, y * 16 + 16)] }).toEqual({ y, luma: Array(16).fill(want[0]) });
        }
        for (let y = 0; y < 8; y++) {
          const want = y < 4 ? gradient(barRow * 16 + 2 * y) : BAR;
          expect({ y, cb: [...samples.subarray(256 + y * 8, 264 + y * 8)], cr: [...samples.subarray(320 + y * 8, 328 + y * 8)] }).toEqual({
            y,
            cb: Array(8).fill(want[1]),
            cr: Array(8).fill(want[2]),
          });
        }
      }
    }
  });

  it('is deterministic', () => {
    expect(clip(128, 72, 4).equals(clip(128, 72, 4))).toBe(true);
    expect(clip(128, 72, 4).equals(clip(128, 72, 8))).toBe(false);
  });
});

/* ------------------------------------------------------------------ JPEG reading */

interface Jpeg {
  width: number;
  height: number;
  components: number[][];
  /** Each 8x8 block's value per component, by block row and column. */
  blocks: number[][][];
}

/** A baseline JPEG's segments, and its DC-only blocks decoded with its own Huffman tables. */
function readJpeg(bytes: Buffer): Jpeg {
  expect([bytes[0], bytes[1]]).toEqual([0xff, 0xd8]);
  expect([bytes.at(-2), bytes.at(-1)]).toEqual([0xff, 0xd9]);
  let at = 2;
  const markers: number[] = [];
  const quant = new Map<number, Buffer>();
  const tables = new Map<string, Map<string, number>>();
  let frame: { width: number; height: number; components: number[][] } | undefined;
  let scan: Buffer | undefined;
  while (!scan) {
    expect(bytes[at]).toBe(0xff);
    const marker = bytes[at + 1];
    markers.push(marker);
    const length = bytes.readUInt16BE(at + 2);
    const body = bytes.subarray(at + 4, at + 2 + length);
    if (marker === 0xe0) expect(body.toString('latin1', 0, 5)).toBe('JFIF\0');
    if (marker === 0xdb) quant.set(body[0] & 0x0f, body.subarray(1, 65));
    if (marker === 0xc0) {
      expect(body[0]).toBe(8);
      const components = Array.from({ length: body[5] }, (_, i) => [...body.subarray(6 + 3 * i, 9 + 3 * i)]);
      frame = { height: body.readUInt16BE(1), width: body.readUInt16BE(3), components };
    }
    if (marker === 0xc4) {
      let t = 0;
      while (t < body.length) {
        const counts = [...body.subarray(t + 1, t + 17)];
        const values = body.subarray(t + 17, t + 17 + counts.reduce((a, b) => a + b, 0));
        const codes = new Map<string, number>();
        let code = 0;
        let k = 0;
        for (let length = 1; length <= 16; length++) {
          for (let i = 0; i < counts[length - 1]; i++) codes.set((code++).toString(2).padStart(length, '0'), values[k++]);
          code <<= 1;
        }
        tables.set(`${body[t] >> 4}/${body[t] & 0x0f}`, codes);
        t += 17 + values.length;
      }
    }
    if (marker === 0xda) scan = bytes.subarray(at + 2 + length, bytes.length - 2);
    at += 2 + length;
  }
  expect(markers).toEqual([0xe0, 0xdb, 0xc0, 0xc4, 0xda]);
  // Unstuff: an FF in entropy-coded data is always followed by 00.
  const data: number[] = [];
  for (let i = 0; i < scan.length; i++) {
    data.push(scan[i]);
    if (scan[i] === 0xff) expect(scan[++i]).toBe(0x00);
  }
  let bit = 0;
  const next = () => (data[bit >> 3] >> (7 - (bit++ & 7))) & 1;
  const symbol = (table: Map<string, number>) => {
    let code = '';
    while (!table.has(code)) {
      code += next();
      expect(code.length).toBeLessThanOrEqual(16);
    }
    return table.get(code)!;
  };
  const { width, height, components } = frame!;
  const previous = components.map(() => 0);
  const blocks: number[][][] = [];
  for (let by = 0; by < Math.ceil(height / 8); by++) {
    blocks.push([]);
    for (let bx = 0; bx < Math.ceil(width / 8); bx++) {
      blocks[by].push(
        components.map(([, , tq], c) => {
          const category = symbol(tables.get('0/0')!);
          let diff = 0;
          for (let i = 0; i < category; i++) diff = diff * 2 + next();
          if (category > 0 && diff < 2 ** (category - 1)) diff -= 2 ** category - 1;
          previous[c] += diff;
          expect(symbol(tables.get('1/0')!)).toBe(0x00); // end of block: no AC coefficient
          // A DC-only block decodes to DC x Q / 8 + 128 in every sample.
          return (previous[c] * quant.get(tq)![0]) / 8 + 128;
        }),
      );
    }
  }
  // Only padding 1-bits are left.
  while (bit < data.length * 8) expect(next()).toBe(1);
  return { width, height, components, blocks };
}

describe('JPEG posters', () => {
  it('are baseline JFIF files whose blocks decode to the colours asked for', () => {
    const colours: Rgb[] = [
      [255, 255, 255],
      [0, 0, 0],
      [200, 30, 90],
      [12, 250, 128],
    ];
    const jpeg = readJpeg(encodeJpeg(100, 36, (bx, by) => colours[(bx + by) % colours.length]));
    expect({ width: jpeg.width, height: jpeg.height }).toEqual({ width: 100, height: 36 });
    expect(jpeg.components.map(([id, sampling]) => [id, sampling])).toEqual([
      [1, 0x11],
      [2, 0x11],
      [3, 0x11],
    ]);
    expect(jpeg.blocks).toHaveLength(5);
    expect(jpeg.blocks[0]).toHaveLength(13);
    for (const [by, row] of jpeg.blocks.entries()) {
      for (const [bx, [y, cb, cr]] of row.entries()) {
        const [r, g, b] = colours[(bx + by) % colours.length];
        // Back to RGB with JFIF's inverse: within rounding of the colour asked for.
        const rgb = [y + 1.402 * (cr - 128), y - 0.344136 * (cb - 128) - 0.714136 * (cr - 128), y + 1.772 * (cb - 128)];
        for (const [i, want] of [r, g, b].entries()) expect(Math.abs(Math.min(255, Math.max(0, rgb[i])) - want)).toBeLessThanOrEqual(2);
      }
    }
  });
});
