import { PassThrough, type Readable } from 'node:stream';

/**
 * `events` for the client, as they come, except that the end waits for `beforeEnd` (work the
 * client must be able to rely on once it sees the end: a stored response, a cache entry).
 * The source is read to its end whether or not the client is still there, so the relay behind
 * it never stalls and the generation is still billed (spec 1 rule 4); `onChunk` sees all of it.
 */
export function endAfter(events: Readable, beforeEnd: () => Promise<unknown>, onChunk?: (chunk: Buffer | string) => void): Readable {
  const out = new PassThrough();
  events.on('data', (chunk: Buffer | string) => {
    onChunk?.(chunk);
    if (!out.destroyed) out.write(chunk);
  });
  events.on('end', () => void beforeEnd().finally(() => out.end()));
  events.on('error', (err) => out.destroy(err));
  return out;
}
