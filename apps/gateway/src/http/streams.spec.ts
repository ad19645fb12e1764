import type { Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import Fastify, { type FastifyInstance } from 'fastify';
import { EventStream, sendEventStream } from './streams';

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
