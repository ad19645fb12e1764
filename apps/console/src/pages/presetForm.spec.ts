import type { PresetVersion } from '../records';
import { comparison, configDiff, findJsonSyntaxError, lineColumn, parseConfig, presetBody, presetFormOf, prettyConfig, slugOfHash } from './presetForm';

describe('findJsonSyntaxError', () => {
  it('is null for valid JSON of every kind', () => {
    for (const text of ['{}', ' {"a": [1, -2.5e3, true, false, null, "x\\n\\u00e9"]} ', '[]', '"s"', '0']) expect(findJsonSyntaxError(text)).toBeNull();
  });

  it('agrees with JSON.parse on what is JSON', () => {
    const texts = [
      '{"a":1,}',
      '[1,]',
      '{a:1}',
      "{'a':1}",
      '{"a" 1}',
      '{"a":01}',
      '{"a":1}}',
      '{"a":"\u0001"}',
      '{"a":"\\x"}',
      '{"a":',
      '',
      '{"a":1} x',
      '-',
      '1.',
      'tru',
    ];
    for (const text of texts) {
      expect(() => JSON.parse(text)).toThrow();
      expect(findJsonSyntaxError(text)).not.toBeNull();
    }
  });

  it('points at the line and column where the text stops being JSON', () => {
    expect(findJsonSyntaxError('{\n  "model": "sim/echo"\n  "models": []\n}')).toMatchObject({
      line: 3,
      column: 3,
      message: expect.stringContaining("Expected ',' or '}'"),
    });
    expect(findJsonSyntaxError('{\n  "a": 1,\n}')).toMatchObject({ line: 3, column: 1, message: expect.stringContaining('one too many') });
    expect(findJsonSyntaxError("{'a': 1}")).toMatchObject({ line: 1, column: 2, message: expect.stringContaining('double quotes') });
  });

  it('points at the start of a string that is never closed', () => {
    expect(findJsonSyntaxError('{"a": "open}')).toMatchObject({ offset: 6, line: 1, column: 7 });
  });

  it('says where the text ends early', () => {
    const text = '{\n  "a": ';
    expect(findJsonSyntaxError(text)).toMatchObject({ offset: text.length, line: 2, column: 8, message: expect.stringContaining('ends') });
  });
});

describe('lineColumn', () => {
  it('counts from 1', () => {
    expect(lineColumn('ab\ncd', 0)).toEqual({ line: 1, column: 1 });
    expect(lineColumn('ab\ncd', 4)).toEqual({ line: 2, column: 2 });
  });
});

describe('parseConfig', () => {
  it('reads an empty editor as no config', () => {
    expect(parseConfig('  \n')).toEqual({ ok: true, config: undefined });
  });
  it('words a syntax error with its line and column', () => {
    const parsed = parseConfig('{\n  "model": "sim/echo",\n}');
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) expect(parsed.message).toMatch(/^Line 3, column 1: /);
  });
  it('refuses JSON that is not an object', () => {
    expect(parseConfig('["sim/echo"]')).toMatchObject({ ok: false, message: expect.stringContaining('JSON object') });
    expect(parseConfig('null')).toMatchObject({ ok: false });
  });
});

describe('presetBody', () => {
  const values = { slug: ' support ', name: '', description: '', config: '{"model": "sim/echo"}' };

  it('on create leaves out an empty name and description', () => {
    expect(presetBody(values, false)).toEqual({ body: { slug: 'support', config: { model: 'sim/echo' } } });
  });

  it('on edit clears an emptied name and description with null', () => {
    expect(presetBody({ ...values, name: ' Support ' }, true)).toEqual({
      body: { slug: 'support', name: 'Support', description: null, config: { model: 'sim/echo' } },
    });
  });

  it('sends no config when the editor is empty', () => {
    expect(presetBody({ ...values, config: '' }, true).body).not.toHaveProperty('config');
  });

  it('names the config, with the offset of a syntax error, and sends nothing', () => {
    expect(presetBody({ ...values, config: '{"model": }' }, false)).toEqual({
      problem: { param: 'config', message: expect.stringMatching(/^Line 1, column 11/), offset: 10 },
    });
  });
});

describe('presetFormOf', () => {
  it('shows the config pretty-printed and empty texts for missing details', () => {
    const form = presetFormOf({ slug: 's', name: null, description: null, version: 1, config: { model: 'sim/echo' }, created_at: '', updated_at: '' });
    expect(form).toEqual({ slug: 's', name: '', description: '', config: '{\n  "model": "sim/echo"\n}' });
  });
});

describe('configDiff', () => {
  it('marks changed lines with signs, one entry a line', () => {
    expect(configDiff({ model: 'sim/echo', params: { temperature: 0 } }, { model: 'sim/fast', params: { temperature: 0 } })).toEqual([
      { kind: 'same', sign: ' ', text: '{' },
      { kind: 'removed', sign: '-', text: '  "model": "sim/echo",' },
      { kind: 'added', sign: '+', text: '  "model": "sim/fast",' },
      { kind: 'same', sign: ' ', text: '  "params": {' },
      { kind: 'same', sign: ' ', text: '    "temperature": 0' },
      { kind: 'same', sign: ' ', text: '  }' },
      { kind: 'same', sign: ' ', text: '}' },
    ]);
  });

  it('shows a first version as all added against nothing', () => {
    expect(configDiff(null, { model: 'sim/echo' }).map((l) => `${l.sign}${l.text}`)).toEqual(['+{', '+  "model": "sim/echo"', '+}']);
  });

  it('has no changes between equal configs', () => {
    expect(configDiff({ a: 1 }, { a: 1 }).every((l) => l.kind === 'same')).toBe(true);
  });
});

describe('comparison', () => {
  const version = (n: number): PresetVersion => ({ version: n, config: { n }, rolled_back_to: null, created_at: '', created_by: null });
  const versions = [version(1), version(2), version(3)];

  it('compares a version with the one before it', () => {
    expect(comparison(versions, 2, 'previous')).toEqual({ from: versions[0], to: versions[1] });
    expect(comparison(versions, 1, 'previous')).toEqual({ from: null, to: versions[0] });
  });

  it('or with the latest', () => {
    expect(comparison(versions, 1, 'latest')).toEqual({ from: versions[0], to: versions[2] });
  });

  it('is null for a version the preset does not have', () => {
    expect(comparison(versions, 9, 'previous')).toBeNull();
  });
});

describe('prettyConfig and slugOfHash', () => {
  it('pretty-prints with two spaces', () => {
    expect(prettyConfig({ a: [1] })).toBe('{\n  "a": [\n    1\n  ]\n}');
  });
  it('reads the preset a hash names', () => {
    expect(slugOfHash('#/presets/my-preset')).toBe('my-preset');
    expect(slugOfHash('#/presets')).toBeNull();
    expect(slugOfHash('#/presets/')).toBeNull();
    expect(slugOfHash('#/keys/x')).toBeNull();
  });
});
