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

/** Events of a byte stream; multi-byte characters split between packets are reassembled. */
export async function* readSse(source: AsyncIterable<Uint8Array>): AsyncGenerator<SseEvent> {
  const decoder = new TextDecoder();
  const parser = new SseParser();
  for await (const bytes of source) yield* parser.push(decoder.decode(bytes, { stream: true }));
  yield* parser.push(decoder.decode());
  yield* parser.end();
}
