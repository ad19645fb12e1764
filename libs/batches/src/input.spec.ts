import { MAX_BATCH_LINES, MAX_REPORTED_ERRORS, validateBatchInput } from './input';

const line = (customId: string, over: Record<string, unknown> = {}) =>
  JSON.stringify({
    custom_id: customId,
    method: 'POST',
    url: '/v1/chat/completions',
    body: { model: 'sim/echo', messages: [{ role: 'user', content: customId }] },
    ...over,
  });

describe('batch input file (WIRE-FORMATS 1.2)', () => {
  it('given well-formed lines (and a final blank line), reads each with its 1-based line number', () => {
    const { lines, errors } = validateBatchInput([line('a'), line('b'), ''], '/v1/chat/completions');
    expect(errors).toEqual([]);
    expect(lines.map((l) => [l.line, l.customId])).toEqual([
      [1, 'a'],
      [2, 'b'],
    ]);
    expect(lines[0].body).toMatchObject({ model: 'sim/echo' });
  });

  it('given bad lines, lists every one with its line number and OpenAI code, and returns no line to run', () => {
    const { lines, errors } = validateBatchInput(
      [line('a'), 'not json', '[1]', line('d', { url: '/v1/embeddings' }), line('a'), line('', {}), line('g', { method: 'GET' }), line('h', { body: 'x' })],
      '/v1/chat/completions',
    );
    expect(lines).toEqual([]);
    expect(errors.map((e) => [e.line, e.code, e.param])).toEqual([
      [2, 'invalid_json_line', null],
      [3, 'invalid_json_line', null],
      [4, 'url_mismatch', 'url'],
      [5, 'duplicate_custom_id', 'custom_id'],
      [6, 'missing_custom_id', 'custom_id'],
      [7, 'invalid_method', 'method'],
      [8, 'invalid_body', 'body'],
    ]);
    expect(errors[2].message).toBe('Line 4: url is "/v1/embeddings"; this batch\'s endpoint is /v1/chat/completions.');
  });

  it('takes 5,000 requests and refuses 5,001; an empty file is an error too', () => {
    const many = (n: number) => Array.from({ length: n }, (_, i) => line(`r${i}`));
    expect(validateBatchInput(many(MAX_BATCH_LINES), '/v1/chat/completions').lines).toHaveLength(MAX_BATCH_LINES);
    expect(validateBatchInput(many(MAX_BATCH_LINES + 1), '/v1/chat/completions').errors[0]).toMatchObject({
      code: 'too_many_tasks',
      line: null,
      param: 'input_file_id',
    });
    expect(validateBatchInput(['', '  '], '/v1/chat/completions').errors).toEqual([
      { code: 'empty_file', message: 'The input file has no requests.', line: null, param: 'input_file_id' },
    ]);
  });

  it('reports at most MAX_REPORTED_ERRORS problems', () => {
    expect(
      validateBatchInput(
        Array.from({ length: 500 }, () => 'x'),
        '/v1/chat/completions',
      ).errors,
    ).toHaveLength(MAX_REPORTED_ERRORS);
  });
});
