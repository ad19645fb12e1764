import type { Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import Fastify, { type FastifyInstance } from 'fastify';
import { endAfter, EventStream, sendEventStream } from './streams';

/** The socket writes of one response: what each flush of the socket handed to the kernel. */
function recordWrites(socket: Socket): string[][] {
  const writes: string[][] = [];
  const internals = socket as unknown as {
    _write(chunk: Buffer, encoding: string, cb: () => void): void;
    _writev(chunks: Array<{ chunk: Buffer | string }>, cb: () => void): void;
  };
  const write = internals._write.bind(socket);
  const writev = internals._writev.bind(socket);
  internals._write = (chunk, encoding, cb) => {
    writes.push([chunk.toString()]);
    write(chunk, encoding, cb);
  };
  internals._writev = (chunks, cb) => {
    writes.push(chunks.map(({ chunk }) => chunk.toString()));
    writev(chunks, cb);
  };
  return writes;
}

describe('an event stream sent with sendEventStream', () => {
  let app: FastifyInstance;
  let writes: string[][] = [];
  let finishWith = (body: EventStream) => body.finish('data: last\n\ndata: [DONE]\n\n');

  beforeAll(async () => {
    app = Fastify();
    app.get('/events', (_request, reply) => {
      writes = recordWrites(reply.raw.socket as Socket);
      const body = new EventStream();
      reply.header('content-type', 'text/event-stream');
      sendEventStream(reply, body);
      body.write('data: first\n\n');
      // The end comes later, as a stream's charge lands after its last upstream event.
      void sleep(20).then(() => finishWith(body));
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
  });
  afterAll(() => app.close());

  const url = () => `http://127.0.0.1:${(app.server.address() as { port: number }).port}/events`;

  it('sends the last frames and the end of the chunked body in one write, after the earlier frames went out at once', async () => {
    const text = await (await fetch(url())).text();
    expect(text).toBe('data: first\n\ndata: last\n\ndata: [DONE]\n\n');
    const tail = writes.slice(1).map((pieces) => pieces.join(''));
    expect(writes[0].join('')).toContain('data: first');
    expect(tail).toHaveLength(1);
    expect(tail[0]).toContain('data: last\n\ndata: [DONE]\n\n');
    expect(tail[0].endsWith('0\r\n\r\n')).toBe(true);
  });

  it('ends a body with nothing left to say', async () => {
    finishWith = (body) => body.finish('');
    expect(await (await fetch(url())).text()).toBe('data: first\n\n');
    expect(writes).toHaveLength(2);
  });

  it('keeps the connection usable for the next request once a response ended', async () => {
    finishWith = (body) => body.finish('data: again\n\n');
    const texts = [];
    for (let i = 0; i < 3; i++) texts.push(await (await fetch(url())).text());
    expect(texts).toEqual(Array(3).fill('data: first\n\ndata: again\n\n'));
  });
});

describe('an event stream whose reader falls behind (issue 41 F)', () => {
  /** Fills a body nobody reads until it says it is full; returns the bytes it took. */
  const fill = (body: EventStream) => {
    let taken = 0;
    for (const frame = 'data: x\n\n'; body.write(frame);) taken += frame.length;
    return taken;
  };

  it('says it is full at its high-water mark, and has room again once a reader takes some', async () => {
    const body = new EventStream();
    expect(fill(body)).toBeLessThan(body.readableHighWaterMark);
    let drained: boolean | null = null;
    const waiting = body.drained(5_000).then((d) => (drained = d));
    await sleep(20);
    expect(drained).toBeNull();
    body.read(body.readableLength);
    expect(await waiting).toBe(true);
  });

  it('gives up waiting after the stall limit when nobody reads', async () => {
    const body = new EventStream();
    fill(body);
    const started = performance.now();
    expect(await body.drained(50)).toBe(false);
    expect(performance.now() - started).toBeGreaterThanOrEqual(45);
  });

  it('stops the wait at once when the body is destroyed (a client that left), and drops what is written after', async () => {
    const body = new EventStream();
    fill(body);
    const waiting = body.drained(5_000);
    body.destroy();
    expect(await waiting).toBe(true);
    expect(body.write('data: more\n\n')).toBe(true);
    expect(await body.drained(5_000)).toBe(true);
  });

  it('destroys a finished body nobody reads after the given time, with the reason', async () => {
    const body = new EventStream();
    fill(body);
    body.finish('data: last\n\n');
    const errors: Error[] = [];
    body.on('error', (err) => errors.push(err));
    body.abandonAfter(30, new Error('stalled'));
    await sleep(80);
    expect(body.destroyed).toBe(true);
    expect(errors.map((e) => e.message)).toEqual(['stalled']);
  });

  it('leaves a finished body alone once its reader took it to the end', async () => {
    const body = new EventStream();
    fill(body);
    body.finish('data: last\n\n');
    body.abandonAfter(30, new Error('stalled'));
    let text = '';
    for await (const part of body) text += String(part);
    await sleep(60);
    expect(text.endsWith('data: last\n\n')).toBe(true);
    expect(body.errored).toBeNull();
  });
});

describe('endAfter (issue 41 F)', () => {
  it('reads its source only as fast as the client reads what it gave out', async () => {
    const source = new EventStream();
    const out = endAfter(source, async () => undefined);
    const frame = 'data: x\n\n';
    // A relay writing as fast as it is let: with nobody reading `out`, it is soon held up.
    let accepted = 0;
    for (let room = true; room && accepted < 1_000_000; accepted += frame.length) {
      if (!source.write(frame)) room = await source.drained(50);
    }
    // The buffers of `source` and `out`, a few high-water marks; without back-pressure, all of it.
    expect(accepted).toBeLessThan(8 * source.readableHighWaterMark);
    const reading = source.drained(5_000);
    while (out.read() !== null);
    expect(await reading).toBe(true);
    out.destroy();
  });

  it('reads its source to the end once the client is gone, every chunk seen, and runs beforeEnd', async () => {
    const source = new EventStream();
    let seen = 0;
    let ended = false;
    const out = endAfter(
      source,
      async () => void (ended = true),
      (chunk) => void (seen += String(chunk).length),
    );
    while (source.write('data: x\n\n'));
    out.destroy();
    await sleep(10);
    for (let i = 0; i < 10_000; i++) if (!source.write('data: x\n\n')) expect(await source.drained(1_000)).toBe(true);
    source.finish('data: [DONE]\n\n');
    await sleep(10);
    expect(ended).toBe(true);
    expect(seen).toBeGreaterThan(10_000 * 'data: x\n\n'.length);
  });

  it('runs beforeEnd when its source fails, and passes the failure on', async () => {
    const source = new EventStream();
    let ended = false;
    const out = endAfter(source, async () => void (ended = true));
    const failed = new Promise<Error>((resolve) => out.on('error', resolve));
    source.destroy(new Error('cut'));
    expect((await failed).message).toBe('cut');
    expect(ended).toBe(true);
  });
});
