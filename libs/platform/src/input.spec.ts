import { inspectJson, MAX_JSON_DEPTH } from './input';

/** Nests `leaf` `levels` arrays deep. */
function nested(levels: number, leaf: unknown = 1): unknown {
  let value = leaf;
  for (let i = 0; i < levels; i++) value = [value];
  return value;
}

describe('inspectJson: what no body or event may hold', () => {
  it('finds nothing in a value PostgreSQL can store', () => {
    expect(inspectJson({ model: 'sim/echo', messages: [{ role: 'user', content: 'hello 😀' }], max_tokens: 16, stream: true, n: null })).toBeNull();
    expect(inspectJson('plain')).toBeNull();
    expect(inspectJson(42)).toBeNull();
    expect(inspectJson(null)).toBeNull();
    expect(inspectJson([])).toBeNull();
  });

  it('names the field of a NUL or a lone surrogate, in OpenAI notation', () => {
    expect(inspectJson({ model: 'sim/echo', messages: [{ role: 'user', content: 'hi\u0000' }] })).toEqual({
      param: 'messages[0].content',
      message: "'messages[0].content' contains a NUL character (\\u0000), which is not accepted.",
    });
    expect(inspectJson({ a: { b: [0, 'ok', 'x\ud800'] } })?.param).toBe('a.b[2]');
    expect(inspectJson('\udc00y')).toEqual({ param: null, message: 'The body contains an unpaired UTF-16 surrogate, which is not accepted.' });
  });

  it('names the object whose field name is bad, not the name itself', () => {
    expect(inspectJson({ model: 'sim/echo', '\udc00': 1 })).toEqual({
      param: null,
      message: 'A field name in the body contains an unpaired UTF-16 surrogate, which is not accepted.',
    });
    expect(inspectJson({ metadata: { tags: [{ 'a\u0000': 'v' }] } })?.param).toBe('metadata.tags[0]');
  });

  it('reports the first problem in document order', () => {
    expect(inspectJson({ first: [{ deep: 'a\u0000' }], second: 'b\u0000' })?.param).toBe('first[0].deep');
    expect(inspectJson({ first: 'a\u0000', second: [{ deep: 'b\u0000' }] })?.param).toBe('first');
    expect(inspectJson([[['x']], 'y\u0000', ['z\u0000']])?.param).toBe('[1]');
  });

  it('refuses nesting deeper than the limit at the first container past it, and only containers count', () => {
    expect(inspectJson(nested(MAX_JSON_DEPTH - 1))).toBeNull();
    expect(inspectJson(nested(MAX_JSON_DEPTH - 1, 'a string leaf'))).toBeNull();
    expect(inspectJson(nested(MAX_JSON_DEPTH, {}))).toEqual({
      param: `${'[0]'.repeat(MAX_JSON_DEPTH)}`.slice(0, 120) + '...',
      message: expect.stringContaining(`is nested deeper than ${MAX_JSON_DEPTH} levels.`),
    });
    expect(inspectJson({ a: { b: { c: 1 } } }, 2)).toEqual({ param: 'a.b', message: "'a.b' is nested deeper than 2 levels." });
    expect(inspectJson({}, 0)).toEqual({ param: null, message: 'The body is nested deeper than 0 levels.' });
  });

  it('bounds the field path of hostile nesting', () => {
    const problem = inspectJson(nested(200, 'bad\u0000'), Number.POSITIVE_INFINITY);
    expect(problem?.param).toBe(`${'[0]'.repeat(40)}...`);
  });

  it('walks a hostile depth without overflowing the stack', () => {
    expect(inspectJson(nested(200_000), Number.POSITIVE_INFINITY)).toBeNull();
  });
});
