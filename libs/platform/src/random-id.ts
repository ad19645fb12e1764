import { randomFillSync } from 'node:crypto';

/**
 * Random bytes for ids, drawn from a pool refilled 4 KiB at a time, as node:crypto's randomUUID
 * does: a call of randomBytes per id cost a generation ~12 µs of CPU, about 1% of its gateway
 * time. Ids only, not secrets: a secret is drawn on its own (secrets.ts, crypto.ts).
 */
const POOL_BYTES = 4096;
const pool = Buffer.alloc(POOL_BYTES);
let offset = POOL_BYTES;

/** `bytes` random bytes (at most the pool's size), as lowercase hex. */
export function randomHex(bytes: number): string {
  if (bytes > POOL_BYTES) throw new RangeError(`at most ${POOL_BYTES} bytes`);
  if (offset + bytes > POOL_BYTES) {
    randomFillSync(pool);
    offset = 0;
  }
  const hex = pool.toString('hex', offset, offset + bytes);
  offset += bytes;
  return hex;
}
