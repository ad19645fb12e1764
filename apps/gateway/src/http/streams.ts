import { PassThrough, Readable } from 'node:stream';
import type { FastifyReply } from 'fastify';

/**
 * An SSE response body whose last frames leave with the end of the response in one write. Node
 * writes the chunk of each tick at the next tick, and the end of a piped body a tick later: a
 * stream's usage chunk and `[DONE]` then went out in one write and the chunked encoding's end in
 * another. Each write to a socket is a system call that also runs the receiver's side of the
 * connection, a large part of a streamed request's CPU. `sendEventStream` corks the socket for
 * the last frames; ending the response uncorks it.
 *
 * A Readable the relay pushes frames into: a PassThrough would run each frame through its
 * writable half and a transform first. Pushed frames are never refused: a slow client's are
 * buffered, as the relay must read its upstream to the end whatever the client does.
 */
export class EventStream extends Readable {
  private beforeLast: (() => void) | null = null;

  override _read(): void {
    // Frames are pushed as they come, not pulled.
  }

  /** Sends frames, unless the body is gone (a client that left). */
  write(frames: string): void {
    if (!this.destroyed && frames !== '') this.push(frames);
  }

  /** Writes the last frames and ends the body. */
  finish(frames: string): void {
    if (this.destroyed) return;
    this.beforeLast?.();
    this.write(frames);
    this.push(null);
  }

  /** Called right before the last frames are written (once). */
  onLastFrames(hook: () => void): void {
    this.beforeLast = hook;
  }
}

/** Sends `body` as the reply's body; an EventStream's last frames and the response's end in one write. */
export function sendEventStream(reply: FastifyReply, body: Readable): void {
  if (body instanceof EventStream) {
    const { raw } = reply;
    body.onLastFrames(() => {
      // A socket already gone needs nothing; the response's end uncorks a live one, whatever came before it.
      if (!raw.destroyed) raw.socket?.cork();
    });
  }
  void reply.send(body);
}

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
