import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

/** How a response ended, as its log line and its count say it. */
export interface ResponseEnd {
  /**
   * The status the client was sent; 499 (the "client closed request" of nginx and the log tools
   * that read its lines) when the client left before any head went out.
   */
  status: number;
  /** The client left before the response was over: a stream it stopped reading, an answer it did not wait for. */
  clientClosed: boolean;
}

export type ResponseOver = (request: FastifyRequest, reply: FastifyReply, end: ResponseEnd) => void;

/** Status logged for a client that left before the head went out. */
const CLIENT_CLOSED_REQUEST = 499;

const handlersOf = new WeakMap<FastifyInstance, ResponseOver[]>();

/**
 * Calls `over` once per request when its response is over, however it ended. Fastify's
 * onResponse waits for the response's 'finish', which never comes when the client leaves: a
 * streamed request whose client went away, or one that left while the model had not answered
 * yet, would have no log line and no count (issue 22: one line per request). The response's
 * 'close' comes either way, once, after 'finish' when it was sent whole. Every caller of one
 * instance shares one hook and one listener per request.
 */
export function onResponseOver(fastify: FastifyInstance, over: ResponseOver): void {
  const handlers = handlersOf.get(fastify);
  if (handlers) {
    handlers.push(over);
    return;
  }
  const all = [over];
  handlersOf.set(fastify, all);
  fastify.addHook('onRequest', (request, reply, done) => {
    const { raw } = reply;
    raw.once('close', () => {
      const clientClosed = !raw.writableFinished;
      const status = clientClosed && !raw.headersSent ? CLIENT_CLOSED_REQUEST : reply.statusCode;
      for (const handler of all) handler(request, reply, { status, clientClosed });
    });
    done();
  });
}
