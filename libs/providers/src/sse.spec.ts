import { readSse, SseParser, type SseEvent } from './sse';

function parseAll(pieces: string[]): SseEvent[] {
  const parser = new SseParser();
  return [...pieces.flatMap((piece) => parser.push(piece)), ...parser.end()];
}

async function collect(source: AsyncIterable<SseEvent>): Promise<SseEvent[]> {
  const events: SseEvent[] = [];
  for await (const event of source) events.push(event);
  return events;
}

async function* bytes(...pieces: Uint8Array[]): AsyncGenerator<Uint8Array> {
  yield* pieces;
}

describe('SseParser', () => {
  const stream = 'data: {"a":1}\n\n: keep-alive\n\nevent: ping\ndata: x\n\ndata: [DONE]\n\n';
  const expected: SseEvent[] = [{ data: '{"a":1}' }, { event: 'ping', data: 'x' }, { data: '[DONE]' }];

  it('dispatches on blank lines and skips comments', () => {
    expect(parseAll([stream])).toEqual(expected);
  });

  it('gives the same events wherever the text is split', () => {
    for (let i = 0; i <= stream.length; i++) {
      expect(parseAll([stream.slice(0, i), stream.slice(i)])).toEqual(expected);
    }
    expect(parseAll([...stream])).toEqual(expected);
  });

  it('joins multi-line data with LF and strips one leading space only', () => {
    expect(parseAll(['data: line 1\ndata:line 2\ndata:  indented\ndata\n\n'])).toEqual([{ data: 'line 1\nline 2\n indented\n' }]);
  });

  it('accepts CRLF and CR line endings, also when CRLF is split between pieces', () => {
    const crlf = 'data: a\r\n\r\ndata: b\r\n\r\n';
    for (let i = 0; i <= crlf.length; i++) {
      expect(parseAll([crlf.slice(0, i), crlf.slice(i)])).toEqual([{ data: 'a' }, { data: 'b' }]);
    }
    expect(parseAll(['data: a\r\rdata: b\r\r'])).toEqual([{ data: 'a' }, { data: 'b' }]);
  });

  it('ignores blank lines without data, other fields, and an event left unterminated at the end', () => {
    expect(parseAll(['\n\nid: 7\nretry: 10\n\n', 'event: lonely\n\n', 'data: cut'])).toEqual([]);
  });
});

describe('readSse', () => {
  it('reassembles a multi-byte character split between packets', async () => {
    const encoded = new TextEncoder().encode('data: héllo 🙂\n\n');
    const split = encoded.indexOf(0xf0) + 2; // inside the 4-byte emoji
    const events = await collect(readSse(bytes(encoded.subarray(0, split), encoded.subarray(split))));
    expect(events).toEqual([{ data: 'héllo 🙂' }]);
  });

  it('ends with a final CR-terminated blank line', async () => {
    const events = await collect(readSse(bytes(new TextEncoder().encode('data: last\r\r'))));
    expect(events).toEqual([{ data: 'last' }]);
  });
});
