import { createParser, type EventSourceParser } from 'eventsource-parser';

/** A dispatched Server-Sent Event. `event` is set only when the stream named one (Anthropic does). */
export interface SseEvent {
  data: string;
  event?: string;
}

/**
 * Incremental `text/event-stream` parser on `eventsource-parser` (the WHATWG rules: LF, CRLF or
 * CR line ends, multi-line data joined with LF, ':' comments used as keep-alive pings). Text
 * arrives in arbitrary pieces; this only collects the events each piece completes.
 */
export class SseParser {
  private completed: SseEvent[] = [];
  private endsWithCr = false;
  private readonly parser: EventSourceParser = createParser({
    onEvent: ({ data, event }) => this.completed.push(event === undefined ? { data } : { data, event }),
  });

  /** Feeds the next piece of decoded text; returns the events it completes. */
  push(text: string): SseEvent[] {
    if (text !== '') this.endsWithCr = text.endsWith('\r');
    this.parser.feed(text);
    return this.take();
  }

  /**
   * Call at the end of the stream: a line still pending (a CR that was not followed by more
   * text) ends there; an event not closed by a blank line is discarded, as the standard requires.
   */
  end(): SseEvent[] {
    // The parser holds a final CR back in case LF follows; at the end it was a line end.
    if (this.endsWithCr) this.parser.feed('\n');
    this.parser.reset({ consume: true });
    return this.take();
  }

  private take(): SseEvent[] {
    const events = this.completed;
    this.completed = [];
    return events;
  }
}

/** Where a stream's events end: its last event by the vendor's rule, and what to do once it came. */
export interface SseEnd {
  isLast(event: SseEvent): boolean;
  /** Called when the last event arrives: typically a short deadline for the body's end. */
  onLast?(): void;
}

/**
 * Events of a byte stream; multi-byte characters split between packets are reassembled.
 *
 * With `end`, a reader that leaves at the stream's last event (`[DONE]`, `message_stop`) does not
 * destroy the body: what follows (only its end, from a well-behaved upstream) is read and
 * dropped. Destroying a body that has not ended closes the upstream connection when the end had
 * not arrived yet, and costs Node an AbortError with its stack trace on every stream. A body
 * that does not end is cut by the caller's deadline (`onLast`); its failure then goes unreported,
 * since everything had arrived. A reader that leaves before the last event destroys the body.
 */
export async function* readSse(source: AsyncIterable<Uint8Array>, end?: SseEnd): AsyncGenerator<SseEvent> {
  const decoder = new TextDecoder();
  const parser = new SseParser();
  // Iterated by hand: leaving a for-await loop would end (destroy) the source before `finally`.
  const bytes = source[Symbol.asyncIterator]();
  let sawLast = false;
  let ended = false;
  const seen = (event: SseEvent): SseEvent => {
    if (!sawLast && end?.isLast(event)) {
      sawLast = true;
      end.onLast?.();
    }
    return event;
  };
  try {
    for (;;) {
      const next = await bytes.next();
      if (next.done) break;
      for (const event of parser.push(decoder.decode(next.value, { stream: true }))) yield seen(event);
    }
    ended = true;
    for (const event of [...parser.push(decoder.decode()), ...parser.end()]) yield seen(event);
  } finally {
    if (!ended && sawLast) {
      try {
        while (!(await bytes.next()).done);
      } catch {
        // Cut after its last event: nothing was lost.
      }
    } else if (!ended) {
      await bytes.return?.();
    }
  }
}
