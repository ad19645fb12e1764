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
 * writable half and a transform first. The body holds at most about its high-water mark (issue
 * 41 F): `write` says when it is full, and the relay then waits for `drained` before it reads
 * its upstream again, so a client that stops reading stops the upstream through TCP instead of
 * piling the whole generation up in the gateway.
 */
export class EventStream extends Readable {
  private beforeLast: (() => void) | null = null;
  /** The relay waiting for the reader to want more: called by `_read`, or when the body is gone. */
  private wanted: (() => void) | null = null;
  private abandon: NodeJS.Timeout | undefined;

  override _read(): void {
    // Frames are pushed as they come; a read only says the reader has room for more.
    this.wake();
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    clearTimeout(this.abandon);
    // A client that left lets the relay read on (and drop) what is left: the generation completes (spec 1 rule 4).
    this.wake();
    callback(error);
  }

  private wake(): void {
    const wanted = this.wanted;
    this.wanted = null;
    wanted?.();
  }

  /**
   * Sends frames, unless the body is gone (a client that left). False when the body is full:
   * wait for `drained` before writing more.
   */
  write(frames: string): boolean {
    if (this.destroyed || frames === '') return true;
    return this.push(frames);
  }

  /**
   * Resolves true once the body has room again (the reader took some) or is gone; false when
   * `ms` pass without the reader taking anything.
   */
  drained(ms: number): Promise<boolean> {
    if (this.destroyed || this.readableLength < this.readableHighWaterMark) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.wanted = null;
        resolve(false);
      }, ms);
      this.wanted = () => {
        clearTimeout(timer);
        resolve(true);
      };
    });
  }

  /** Writes the last frames and ends the body. */
  finish(frames: string): void {
    if (this.destroyed) return;
    this.beforeLast?.();
    this.write(frames);
    this.push(null);
  }

  /**
   * Once finished, destroys the body unless its reader takes the rest within `ms`: a client that
   * stopped reading must not keep its buffers and connection forever. Destroying the body after
   * its headers went out closes the connection.
   */
  abandonAfter(ms: number, reason: Error): void {
    if (this.destroyed || this.readableEnded) return;
    this.abandon = setTimeout(() => this.destroy(reason), ms).unref();
    this.once('end', () => clearTimeout(this.abandon));
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
      // A socket already gone needs nothing; the response's end uncorks a live one, whatever came
      // before it. Only when nothing is waiting to go out: a client behind (issue 41 F) would
      // leave the frames before the last queued behind the cork, the body never drained, and the
      // end that uncorks never reached.
      if (!raw.destroyed && body.readableLength === 0 && raw.writableLength === 0) raw.socket?.cork();
    });
  }
  void reply.send(body);
}

/**
 * `events` for the client, as they come, except that the end waits for `beforeEnd` (work the
 * client must be able to rely on once it sees the end: a stored response, a cache entry).
 * `events` is read only as fast as the client reads (issue 41 F), so a client that stops reading
 * holds the relay behind it back instead of having the whole stream buffered here; once the
 * client is gone, it is read to its end whatever comes, so the generation is still billed (spec
 * 1 rule 4). `onChunk` sees all of it. `beforeEnd` also runs when `events` fails, without
 * holding up the client's error.
 */
export function endAfter(events: Readable, beforeEnd: () => Promise<unknown>, onChunk?: (chunk: Buffer | string) => void): Readable {
  const out = new PassThrough();
  events.on('data', (chunk: Buffer | string) => {
    onChunk?.(chunk);
    if (!out.destroyed && !out.write(chunk)) events.pause();
  });
  out.on('drain', () => events.resume());
  // Also after a clean end, when `events` has ended already and resuming it does nothing.
  out.on('close', () => events.resume());
  events.on('end', () => void beforeEnd().finally(() => out.end()));
  events.on('error', (err) => {
    out.destroy(err);
    void beforeEnd();
  });
  return out;
}
