import { ApiFailure } from '../api';
import { modelOf, printedSegments, promptLoggingBody, promptLoggingFormOf, type Segment } from './promptLogs';

/** The segments back to text, a placeholder as the JSON string the server stored. */
const asJson = (segments: Segment[]) =>
  segments.map((s) => ('text' in s ? s.text : JSON.stringify(s.placeholder === 'image' ? '[image omitted]' : '[binary content omitted]'))).join('');

describe('prompt logging setting', () => {
  it('round-trips the setting through the form', () => {
    expect(promptLoggingBody(promptLoggingFormOf({ enabled: true, retention_days: 7 }))).toEqual({ prompt_logging: { enabled: true, retention_days: 7 } });
    expect(promptLoggingBody({ enabled: false, retentionDays: ' 30 ' })).toEqual({ prompt_logging: { enabled: false, retention_days: 30 } });
  });

  it.each(['', '0', '31', '2.5', 'seven'])('refuses a retention of %p, naming the field as the API does', (days) => {
    let failure: unknown;
    try {
      promptLoggingBody({ enabled: true, retentionDays: days });
    } catch (err) {
      failure = err;
    }
    expect(failure).toBeInstanceOf(ApiFailure);
    expect((failure as ApiFailure).param).toBe('prompt_logging.retention_days');
  });
});

describe('printed logs', () => {
  const request = {
    model: 'sim/echo',
    messages: [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'look at this' },
          { type: 'image_url', image_url: { url: '[image omitted]' } },
        ],
      },
    ],
    temperature: 0.5,
    stream: false,
    stop: null,
    tools: [],
    metadata: {},
  };

  it('prints exactly as JSON.stringify with two spaces', () => {
    expect(asJson(printedSegments(request))).toBe(JSON.stringify(request, null, 2));
    expect(asJson(printedSegments([1, 'a', [null, {}]]))).toBe(JSON.stringify([1, 'a', [null, {}]], null, 2));
  });

  it('picks out a placeholder string as its own segment, only when it is the whole value', () => {
    const segments = printedSegments(request);
    expect(segments.filter((s) => 'placeholder' in s)).toEqual([{ placeholder: 'image' }]);
    const quoted = printedSegments({ text: 'the words [image omitted] in a sentence', b: '[binary content omitted]' });
    expect(quoted.filter((s) => 'placeholder' in s)).toEqual([{ placeholder: 'binary' }]);
    expect(asJson(quoted)).toContain('"the words [image omitted] in a sentence"');
  });

  it('keeps a text segment whole between placeholders, so the words can be searched', () => {
    const segments = printedSegments({ a: '[image omitted]', b: 'x' });
    expect(segments).toEqual([{ text: '{\n  "a": ' }, { placeholder: 'image' }, { text: ',\n  "b": "x"\n}' }]);
  });

  it('shows a streamed answer (a string) as its text, not quoted', () => {
    const stream = 'data: {"id":"gen_1"}\n\ndata: [DONE]\n\n';
    expect(printedSegments(stream)).toEqual([{ text: stream }]);
    expect(printedSegments('[binary content omitted]')).toEqual([{ placeholder: 'binary' }]);
  });

  it('names the model that answered, else the one asked for', () => {
    expect(modelOf({ request: { model: 'a/asked' }, response: { model: 'a/answered' } })).toBe('a/answered');
    expect(modelOf({ request: { model: 'a/asked' }, response: 'data: ...' })).toBe('a/asked');
    expect(modelOf({ request: null, response: null })).toBeNull();
  });
});
