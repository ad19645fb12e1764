import type { BilledAnswer } from '@svc/billing';
import { SSE_HEADERS } from '../http/reply-headers';
import { endAfter, EventStream } from '../http/streams';
import type { Answer } from './replay';

/** The body a billed stream is written into: the reply's, sent by Fastify. */
export const openEventStream = (): EventStream => new EventStream();

/** A billed use case's answer as the edge sends it: its generation id in a header, a stream as SSE that ends once what it waits for is done. */
export function presentBilled(answer: BilledAnswer<EventStream>): Answer {
  const { generationId } = answer;
  if (answer.stream) {
    const { body, finished, ready } = answer.stream;
    return {
      generationId,
      headers: { ...answer.headers, ...SSE_HEADERS, 'x-svc-generation-id': generationId },
      stream: { body: ready ? endAfter(body, () => ready) : body, finished },
    };
  }
  return { generationId, headers: { ...answer.headers, 'x-svc-generation-id': generationId }, json: answer.json };
}
