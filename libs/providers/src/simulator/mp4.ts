/**
 * A minimal MP4 writer for the simulated video model: an ISO BMFF file (`ftyp`, `moov` before
 * `mdat`, so a player can start before the end) holding one H.264 track that browsers, players
 * and ffprobe accept. There is no encoder on the machines, and none is needed: the stream is
 * Constrained Baseline H.264 (CAVLC) made only of
 *
 * - an IDR picture whose macroblocks are all I_PCM (raw samples, no transform or entropy coding:
 *   384 bytes a macroblock), and
 * - P pictures that skip every macroblock (a few bytes each) except those that change, which are
 *   I_PCM again (mb_type 30 in a P slice).
 *
 * What changes is a progress bar filling the last fully visible macroblock row from left to
 * right over the clip, so the file is a clip that moves, not a still. The picture is small
 * (the longer side PICTURE_LONG_SIDE pixels) to keep the file a few tens of KB; its aspect
 * ratio is the one asked for, and its duration exactly the seconds asked for.
 *
 * H.264 references: ITU-T H.264 (08/2021) 7.3.2.1.1 (SPS), 7.3.2.2 (PPS), 7.3.3 (slice
 * header), 7.3.4 (slice data), 7.3.5 (macroblock layer, I_PCM), 7.4.1 (emulation prevention);
 * MP4: ISO/IEC 14496-12 (boxes) and 14496-15 5.3.3 (`avcC`).
 */

export type Yuv = readonly [y: number, cb: number, cr: number];

export interface ClipSpec {
  /** Visible picture size in pixels, both even. */
  width: number;
  height: number;
  seconds: number;
  /** The colour of picture row `y` (the background: a gradient). */
  background: (y: number) => Yuv;
  /** The colour of the progress bar. */
  bar: Yuv;
}

export const FPS = 24;
/** 512 ticks a frame at FPS 24, the timescale ffmpeg itself picks for 24 fps. */
const TIMESCALE = FPS * 512;
const MOVIE_TIMESCALE = 1000;
/** Keeps the I_PCM picture at a few KB per 16x16 macroblock row. */
export const PICTURE_LONG_SIDE = 128;

/** The visible picture for a clip of `width` x `height` (any size or ratio): its longer side PICTURE_LONG_SIDE, both sides even. */
export function pictureSize(width: number, height: number): { width: number; height: number } {
  const even = (n: number) => Math.max(2, 2 * Math.round(n / 2));
  return width >= height
    ? { width: PICTURE_LONG_SIDE, height: even((PICTURE_LONG_SIDE * height) / width) }
    : { width: even((PICTURE_LONG_SIDE * width) / height), height: PICTURE_LONG_SIDE };
}

/** BT.601 limited range, the colour space a decoder assumes for a stream that names none. */
export function rgbToYuv601Limited(r: number, g: number, b: number): Yuv {
  return [
    16 + (65.481 * r + 128.553 * g + 24.966 * b) / 255,
    128 + (-37.797 * r - 74.203 * g + 112 * b) / 255,
    128 + (112 * r - 93.786 * g - 18.214 * b) / 255,
  ].map((v) => Math.min(235, Math.max(16, Math.round(v)))) as unknown as Yuv;
}

/* ------------------------------------------------------------------ H.264 bitstream */

class BitWriter {
  private readonly bytes: number[] = [];
  private current = 0;
  private used = 0;

  bits(value: number, count: number): this {
    for (let i = count - 1; i >= 0; i--) this.bit((value >>> i) & 1);
    return this;
  }

  bit(bit: number): this {
    this.current = (this.current << 1) | bit;
    if (++this.used === 8) {
      this.bytes.push(this.current);
      this.current = 0;
      this.used = 0;
    }
    return this;
  }

  /** Exp-Golomb ue(v). */
  ue(value: number): this {
    const coded = value + 1;
    const length = 32 - Math.clz32(coded);
    return this.bits(0, length - 1).bits(coded, length);
  }

  /** se(v): 1, -1, 2, -2 ... as 1, 2, 3, 4 ... */
  se(value: number): this {
    return this.ue(value > 0 ? 2 * value - 1 : -2 * value);
  }

  alignWithZeros(): this {
    while (this.used !== 0) this.bit(0);
    return this;
  }

  /** Whole bytes; the writer must be aligned. */
  raw(bytes: Uint8Array): this {
    for (const byte of bytes) this.bits(byte, 8);
    return this;
  }

  /** rbsp_trailing_bits(): a one, then zeros to the byte boundary. */
  trailing(): Buffer {
    this.bit(1).alignWithZeros();
    return Buffer.from(this.bytes);
  }
}

/** A NAL unit: its header byte and the RBSP with emulation prevention bytes (7.4.1). */
function nal(refIdc: number, type: number, rbsp: Buffer): Buffer {
  const out: number[] = [(refIdc << 5) | type];
  let zeros = 0;
  for (const byte of rbsp) {
    if (zeros >= 2 && byte <= 3) {
      out.push(3);
      zeros = 0;
    }
    out.push(byte);
    zeros = byte === 0 ? zeros + 1 : 0;
  }
  return Buffer.from(out);
}

const PROFILE_BASELINE = 66;
/** constraint_set0 and constraint_set1: Constrained Baseline, which every decoder takes. */
const CONSTRAINTS = 0xc0;
/** 3.0: room for an I_PCM picture in the coded picture buffer. */
const LEVEL = 30;
const LOG2_MAX_FRAME_NUM = 8;
const NAL_SLICE = 1;
const NAL_IDR = 5;
const NAL_SPS = 7;
const NAL_PPS = 8;
const MB_I_PCM_IN_I_SLICE = 25;
/** I mb_types follow the 5 P ones in a P slice (Table 7-13). */
const MB_I_PCM_IN_P_SLICE = 5 + MB_I_PCM_IN_I_SLICE;
const SLICE_P = 5;
const SLICE_I = 7;

interface Layout {
  mbWidth: number;
  mbHeight: number;
  width: number;
  height: number;
}

function sps({ mbWidth, mbHeight, width, height }: Layout): Buffer {
  const w = new BitWriter()
    .bits(PROFILE_BASELINE, 8)
    .bits(CONSTRAINTS, 8)
    .bits(LEVEL, 8)
    .ue(0) // seq_parameter_set_id
    .ue(LOG2_MAX_FRAME_NUM - 4)
    .ue(2) // pic_order_cnt_type 2: output order is decoding order, nothing in the slice header
    .ue(1) // max_num_ref_frames
    .bit(0) // gaps_in_frame_num_value_allowed_flag
    .ue(mbWidth - 1)
    .ue(mbHeight - 1)
    .bit(1) // frame_mbs_only_flag
    .bit(1); // direct_8x8_inference_flag
  // Cropping is counted in pairs of luma samples in a 4:2:0 progressive picture (7.4.2.1.1).
  const right = (mbWidth * 16 - width) / 2;
  const bottom = (mbHeight * 16 - height) / 2;
  if (right > 0 || bottom > 0) w.bit(1).ue(0).ue(right).ue(0).ue(bottom);
  else w.bit(0);
  return nal(3, NAL_SPS, w.bit(0).trailing()); // vui_parameters_present_flag 0
}

function pps(): Buffer {
  const w = new BitWriter()
    .ue(0) // pic_parameter_set_id
    .ue(0) // seq_parameter_set_id
    .bit(0) // entropy_coding_mode_flag: CAVLC
    .bit(0) // bottom_field_pic_order_in_frame_present_flag
    .ue(0) // num_slice_groups_minus1
    .ue(0) // num_ref_idx_l0_default_active_minus1
    .ue(0) // num_ref_idx_l1_default_active_minus1
    .bit(0) // weighted_pred_flag
    .bits(0, 2) // weighted_bipred_idc
    .se(0) // pic_init_qp_minus26
    .se(0) // pic_init_qs_minus26
    .se(0) // chroma_qp_index_offset
    .bit(1) // deblocking_filter_control_present_flag, so that slices can turn it off
    .bit(0) // constrained_intra_pred_flag
    .bit(0); // redundant_pic_cnt_present_flag
  return nal(3, NAL_PPS, w.trailing());
}

/** The 384 samples of one I_PCM macroblock: 256 luma, then 64 Cb, then 64 Cr, each row by row. */
function pcmSamples(pixel: (x: number, y: number) => Yuv, mbX: number, mbY: number): Uint8Array {
  const samples = new Uint8Array(384);
  for (let y = 0; y < 16; y++) for (let x = 0; x < 16; x++) samples[y * 16 + x] = pixel(mbX * 16 + x, mbY * 16 + y)[0];
  for (let y = 0; y < 8; y++) {
    for (let x = 0; x < 8; x++) {
      const [, cb, cr] = pixel(mbX * 16 + 2 * x, mbY * 16 + 2 * y);
      samples[256 + y * 8 + x] = cb;
      samples[320 + y * 8 + x] = cr;
    }
  }
  return samples;
}

function sliceHeader(w: BitWriter, idr: boolean, frameNum: number): void {
  w.ue(0) // first_mb_in_slice
    .ue(idr ? SLICE_I : SLICE_P)
    .ue(0) // pic_parameter_set_id
    .bits(frameNum % (1 << LOG2_MAX_FRAME_NUM), LOG2_MAX_FRAME_NUM);
  if (idr) {
    w.ue(0) // idr_pic_id
      .bit(0) // no_output_of_prior_pics_flag
      .bit(0); // long_term_reference_flag
  } else {
    w.bit(0) // num_ref_idx_active_override_flag
      .bit(0) // ref_pic_list_modification_flag_l0
      .bit(0); // adaptive_ref_pic_marking_mode_flag: sliding window
  }
  w.se(0) // slice_qp_delta
    .ue(1); // disable_deblocking_filter_idc: I_PCM needs none, and skipped blocks stay exact
}

/** One picture: IDR with every macroblock I_PCM, or P with only `coded` macroblocks I_PCM and the rest skipped. */
function picture(layout: Layout, pixel: (x: number, y: number) => Yuv, frameNum: number, coded: readonly number[] | 'all'): Buffer {
  const idr = coded === 'all';
  const w = new BitWriter();
  sliceHeader(w, idr, frameNum);
  const total = layout.mbWidth * layout.mbHeight;
  const addresses = idr ? Array.from({ length: total }, (_, i) => i) : [...coded].sort((a, b) => a - b);
  let next = 0;
  for (const address of addresses) {
    // In a P slice every coded macroblock follows its mb_skip_run (7.3.4), 0 included.
    if (!idr) w.ue(address - next);
    w.ue(idr ? MB_I_PCM_IN_I_SLICE : MB_I_PCM_IN_P_SLICE).alignWithZeros();
    w.raw(pcmSamples(pixel, address % layout.mbWidth, Math.floor(address / layout.mbWidth)));
    next = address + 1;
  }
  if (!idr && next < total) w.ue(total - next);
  return nal(idr ? 3 : 2, idr ? NAL_IDR : NAL_SLICE, w.trailing());
}

/* ------------------------------------------------------------------ ISO BMFF */

function box(type: string, ...payload: Uint8Array[]): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(8 + payload.reduce((n, p) => n + p.length, 0), 0);
  head.write(type, 4, 'latin1');
  return Buffer.concat([head, ...payload]);
}

function fullBox(type: string, version: number, flags: number, ...payload: Uint8Array[]): Buffer {
  return box(type, u32((version << 24) | flags), ...payload);
}

const u8 = (...values: number[]) => Buffer.from(values);
function u16(...values: number[]): Buffer {
  const b = Buffer.alloc(2 * values.length);
  values.forEach((v, i) => b.writeUInt16BE(v, 2 * i));
  return b;
}
function u32(...values: number[]): Buffer {
  const b = Buffer.alloc(4 * values.length);
  values.forEach((v, i) => b.writeUInt32BE(v >>> 0, 4 * i));
  return b;
}
/** The identity transformation matrix of mvhd and tkhd. */
const MATRIX = u32(0x00010000, 0, 0, 0, 0x00010000, 0, 0, 0, 0x40000000);

function sampleEntry(layout: Layout, spsNal: Buffer, ppsNal: Buffer): Buffer {
  const avcC = box(
    'avcC',
    u8(1, PROFILE_BASELINE, CONSTRAINTS, LEVEL, 0xff /* 4-byte NAL lengths */, 0xe1 /* one SPS */),
    u16(spsNal.length),
    spsNal,
    u8(1),
    u16(ppsNal.length),
    ppsNal,
  );
  const compressor = Buffer.alloc(32);
  return box(
    'avc1',
    Buffer.alloc(6), // reserved
    u16(1), // data_reference_index
    Buffer.alloc(16), // pre_defined, reserved, pre_defined[3]
    u16(layout.width, layout.height),
    u32(0x00480000, 0x00480000, 0), // 72 dpi, reserved
    u16(1), // frame_count
    compressor,
    u16(0x0018), // depth
    u16(0xffff), // pre_defined -1
    avcC,
  );
}

/** The whole MP4 file. Deterministic: the same spec gives the same bytes (every time field 0). */
export function encodeClip(spec: ClipSpec): Buffer {
  const { width, height } = spec;
  if (width % 2 || height % 2 || width < 2 || height < 2) throw new RangeError(`picture size must be even, not ${width}x${height}`);
  const layout: Layout = { mbWidth: Math.ceil(width / 16), mbHeight: Math.ceil(height / 16), width, height };
  const frames = Math.max(1, Math.round(spec.seconds * FPS));
  // The last macroblock row whose pixels are all visible (the one below may be cropped), or the
  // only row of a picture lower than one macroblock.
  const barRow = Math.max(0, Math.floor(height / 16) - 1);
  const filledAt = (frame: number) => Math.floor((layout.mbWidth * (frame + 1)) / frames);
  const pixelAt =
    (filled: number) =>
    (x: number, y: number): Yuv => {
      const inBar = Math.floor(y / 16) === barRow && y % 16 >= 8 && Math.floor(x / 16) < filled;
      return inBar ? spec.bar : spec.background(Math.min(y, height - 1));
    };

  const samples: Buffer[] = [];
  for (let frame = 0; frame < frames; frame++) {
    const filled = filledAt(frame);
    const before = frame === 0 ? 0 : filledAt(frame - 1);
    const coded = frame === 0 ? 'all' : Array.from({ length: filled - before }, (_, i) => barRow * layout.mbWidth + before + i);
    const unit = picture(layout, pixelAt(filled), frame, coded);
    samples.push(Buffer.concat([u32(unit.length), unit]));
  }

  const mediaDuration = frames * (TIMESCALE / FPS);
  const movieDuration = Math.round((mediaDuration * MOVIE_TIMESCALE) / TIMESCALE);
  const stbl = (chunkOffset: number) =>
    box(
      'stbl',
      fullBox('stsd', 0, 0, u32(1), sampleEntry(layout, sps(layout), pps())),
      fullBox('stts', 0, 0, u32(1, frames, TIMESCALE / FPS)),
      fullBox('stss', 0, 0, u32(1, 1)), // only the first picture is a sync sample
      fullBox('stsc', 0, 0, u32(1, 1, frames, 1)), // one chunk of every sample
      fullBox('stsz', 0, 0, u32(0, frames, ...samples.map((s) => s.length))),
      fullBox('stco', 0, 0, u32(1, chunkOffset)),
    );
  const moov = (chunkOffset: number) =>
    box(
      'moov',
      fullBox('mvhd', 0, 0, u32(0, 0, MOVIE_TIMESCALE, movieDuration, 0x00010000), u16(0x0100), Buffer.alloc(10), MATRIX, Buffer.alloc(24), u32(2)),
      box(
        'trak',
        // flags: track_enabled | track_in_movie
        fullBox('tkhd', 0, 3, u32(0, 0, 1, 0, movieDuration), Buffer.alloc(8), u16(0, 0, 0, 0), MATRIX, u32(width << 16, height << 16)),
        box(
          'mdia',
          fullBox('mdhd', 0, 0, u32(0, 0, TIMESCALE, mediaDuration), u16(0x55c4 /* "und" */, 0)),
          fullBox('hdlr', 0, 0, u32(0), Buffer.from('vide', 'latin1'), Buffer.alloc(12), Buffer.from('VideoHandler\0', 'latin1')),
          box('minf', fullBox('vmhd', 0, 1, u16(0, 0, 0, 0)), box('dinf', fullBox('dref', 0, 0, u32(1), fullBox('url ', 0, 1))), stbl(chunkOffset)),
        ),
      ),
    );
  const ftyp = box('ftyp', Buffer.from('isom', 'latin1'), u32(0x200), Buffer.from('isomiso2avc1mp41', 'latin1'));
  // The chunk offset is a fixed-size field, so the moov's size does not depend on its value.
  const mdatStart = ftyp.length + moov(0).length + 8;
  return Buffer.concat([ftyp, moov(mdatStart), box('mdat', ...samples)]);
}
