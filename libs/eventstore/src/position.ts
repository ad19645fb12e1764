import type { Position } from './port';

const WIDTH = 20; // digits of 2^64 - 1

/** Encodes a position from two unsigned 64-bit parts so string order is numeric order. */
export function encodePosition(major: bigint, minor: bigint): Position {
  if (major < 0n || minor < 0n) throw new RangeError('position parts must be unsigned');
  return `${major.toString().padStart(WIDTH, '0')}/${minor.toString().padStart(WIDTH, '0')}`;
}

export function decodePosition(position: Position): { major: bigint; minor: bigint } {
  const m = /^(\d{20})\/(\d{20})$/.exec(position);
  if (!m) throw new RangeError(`not a position: ${JSON.stringify(position)}`);
  return { major: BigInt(m[1]), minor: BigInt(m[2]) };
}

export function comparePositions(a: Position, b: Position): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

export const START: Position = '';
