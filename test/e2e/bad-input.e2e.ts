import { usdToNano } from '@svc/platform';
import { tone, wav } from '@svc/providers';
import { api, createAccountWithKey, startGateway, stopGateway, type Call, type StartedGateway } from '../support/gateway';

const ADMIN_TOKEN = 'admin-token-for-bad-input-tests';

/** One second of a real WAV (what the simulated transcriber reads), with the words it hears. */
const recording = (text: string) => Buffer.concat([wav(tone(24_000)), Buffer.from(`\n#sim-text ${text}\n`)]);

/** A multipart body built by hand, for what FormData will not send (no filename, a typed field, a cut). */
function multipart(boundary: string, parts: { name: string; value: string | Buffer; filename?: string; type?: string }[], { close = true } = {}): Buffer {
  const chunks: Buffer[] = [];
  for (const part of parts) {
    const disposition = `form-data; name="${part.name}"${part.filename !== undefined ? `; filename="${part.filename}"` : ''}`;
    chunks.push(
      Buffer.from(`--${boundary}\r\nContent-Disposition: ${disposition}\r\n${part.type ? `Content-Type: ${part.type}\r\n` : ''}\r\n`),
      Buffer.from(part.value),
      Buffer.from('\r\n'),
    );
  }
  if (close) chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return Buffer.concat(chunks);
}

/** Spec 2.1: `{error: {message, type, code, param}}`. */
function expectErrorObject(body: any, expected: { type: string; code: string; param: string | null }): void {
  expect(Object.keys(body)).toEqual(['error']);
  expect(typeof body.error.message).toBe('string');
  expect({ type: body.error.type, code: body.error.code, param: body.error.param }).toEqual(expected);
}

/**
 * Issue 41, items 7 to 11: bad input is a 4XX in the spec's error object (section 2.1, section 7
 * for the statuses), never a 500, never billed, never a partial write.
 */
describe('bad input is refused, free and leaves nothing behind (issue 41)', () => {
  let gw: StartedGateway;
  let call: Call;
  let key: string;
  let management: string;
  let accountId: string;

  const balance = async () => {
    const r = await call('GET', '/v1/credits', { key });
    expect(r.status).toBe(200);
    return r.json.data as { balance: number; held: number };
  };
  const fileIds = async () => ((await call('GET', '/v1/files', { key })).json.data as { id: string }[]).map((f) => f.id);
  const videoIds = async () => ((await call('GET', '/v1/videos', { key })).json.data as { id: string }[]).map((v) => v.id);
  /** Everything a refused request must leave as it was: the balance and holds, files, videos, keys. */
  const state = async () => ({
    credits: await balance(),
    files: await fileIds(),
    videos: await videoIds(),
    keys: (await call('GET', '/v1/keys', { key: management })).json.data.length as number,
  });
  const post = async (path: string, body: Buffer | string, contentType: string, apiKey = key) => {
    const response = await fetch(`${gw.url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${apiKey}`, 'content-type': contentType }, body });
    const text = await response.text();
    return { status: response.status, json: JSON.parse(text) as any };
  };

  beforeAll(async () => {
    gw = await startGateway({ SVC_ADMIN_TOKEN: ADMIN_TOKEN });
    call = api(gw.url.replace(/\/v1$/, ''));
    const account = await createAccountWithKey(call, ADMIN_TOKEN, 5);
    key = account.key;
    accountId = account.accountId;
    const manager = await call('POST', `/admin/accounts/${account.accountId}/keys`, {
      body: { scope: 'management', name: 'manager' },
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    });
    expect(manager.status).toBe(201);
    management = manager.json.key;
  }, 60_000);

  afterAll(() => stopGateway(gw));

  describe('issue 41 item 7: a malformed multipart body is a 400 on every route that takes a form', () => {
    /** A valid form for each route, so the malformation is the first thing wrong with it. */
    const FORMS: Record<string, Parameters<typeof multipart>[1]> = {
      '/files': [
        { name: 'purpose', value: 'batch' },
        { name: 'file', value: `${JSON.stringify({ custom_id: 'a', method: 'POST', url: '/v1/chat/completions', body: {} })}\n`, filename: 'a.jsonl' },
      ],
      '/audio/transcriptions': [
        { name: 'model', value: 'sim/whisper' },
        { name: 'file', value: recording('cut'), filename: 'a.wav', type: 'audio/wav' },
      ],
      '/audio/translations': [
        { name: 'model', value: 'sim/whisper' },
        { name: 'file', value: recording('cut'), filename: 'a.wav', type: 'audio/wav' },
      ],
      '/videos': [
        { name: 'model', value: 'sim/video' },
        { name: 'prompt', value: 'a cat walking along a wall in the sun' },
      ],
    };
    const form = (route: string, options?: { close: boolean }) => multipart('b0undary', FORMS[route], options);
    const CASES: [string, string, (route: string) => Buffer, string | null][] = [
      ['no boundary in the Content-Type', 'multipart/form-data', (route) => form(route), 'Content-Type'],
      ['a boundary the body does not use', 'multipart/form-data; boundary=other', (route) => form(route), null],
      ['a body cut short inside its first field', 'multipart/form-data; boundary=b0undary', (route) => form(route).subarray(0, 60), null],
      ['a body cut short inside its last part', 'multipart/form-data; boundary=b0undary', (route) => form(route).subarray(0, form(route).length - 30), null],
      ['a body without its closing boundary', 'multipart/form-data; boundary=b0undary', (route) => form(route, { close: false }), null],
    ];

    it('the forms are valid as built: each route accepts its own', async () => {
      for (const route of ['/files', '/audio/transcriptions'])
        expect([route, (await post(route, form(route), 'multipart/form-data; boundary=b0undary')).status]).toEqual([route, 200]);
    });

    it.each(Object.keys(FORMS).flatMap((route) => CASES.map(([what, type, body, param]) => [route, what, type, body, param] as const)))(
      'POST %s with %s: 400 malformed_multipart, nothing stored or billed',
      async (route, _what, contentType, body, param) => {
        const before = await state();
        const r = await post(route, body(route), contentType);
        expect(r.status).toBe(400);
        expectErrorObject(r.json, { type: 'invalid_request_error', code: 'malformed_multipart', param });
        expect(await state()).toEqual(before);
      },
    );

    it.each([
      ['/audio/transcriptions', 1024 * 1024],
      ['/audio/translations', 1024 * 1024],
      ['/videos', 256 * 1024],
      ['/files', 1024],
    ])('POST %s with a text field over its limit (%i bytes): 413 naming the field, not read truncated', async (route, limit) => {
      const before = await state();
      const field = route === '/files' ? 'purpose' : 'prompt';
      const body = multipart(
        'b0undary',
        [
          { name: 'model', value: route === '/videos' ? 'sim/video' : 'sim/whisper' },
          { name: field, value: 'x'.repeat(limit + 1) },
          ...(route === '/videos'
            ? []
            : [
                {
                  name: 'file',
                  value: route === '/files' ? '{"custom_id": "a"}\n' : recording('long prompt'),
                  filename: route === '/files' ? 'a.jsonl' : 'a.wav',
                },
              ]),
        ].filter((p) => !(route === '/files' && p.name === 'model')),
      );
      const r = await post(route, body, 'multipart/form-data; boundary=b0undary');
      expect(r.status).toBe(413);
      expectErrorObject(r.json, { type: 'invalid_request_error', code: 'field_too_large', param: field });
      expect(await state()).toEqual(before);
    });
  });

  describe('issue 41 item 8: a path parameter is decoded once, and no percent-encoding is a 500', () => {
    it('POST /v1/search/%25 searches on engine "%" (404 naming engine), and /v1/search/%2525 on "%25": nothing billed', async () => {
      const before = await state();
      for (const [segment, engine] of [
        ['%25', '%'],
        ['%2525', '%25'],
        ['%25zz', '%zz'],
      ]) {
        const r = await call('POST', `/v1/search/${segment}`, { key, body: { query: 'cats' } });
        expect([segment, r.status]).toEqual([segment, 404]);
        expectErrorObject(r.json, { type: 'not_found_error', code: 'model_not_found', param: 'engine' });
        expect(r.json.error.message).toContain(`'${engine}'`);
      }
      // Still decoded once: an engine id with its slash escaped is that engine.
      const searched = await call('POST', '/v1/search/sim%2Ftavily', { key, body: { query: 'cats' } });
      expect([searched.status, searched.json.model]).toEqual([200, 'sim/tavily']);
      const after = await state();
      expect({ ...after, credits: null }).toEqual({ ...before, credits: null });
      expect(usdToNano(before.credits.balance) - usdToNano(after.credits.balance)).toBe(usdToNano(searched.json.usage.cost));
    });

    it.each([
      ['GET', '/v1/keys/{}', 'management'],
      ['PATCH', '/v1/keys/{}', 'management'],
      ['DELETE', '/v1/keys/{}', 'management'],
      ['POST', '/v1/keys/{}/rotate', 'management'],
      ['GET', '/v1/files/{}', 'full'],
      ['DELETE', '/v1/files/{}', 'full'],
      ['GET', '/v1/files/{}/content', 'full'],
      ['GET', '/v1/batches/{}', 'full'],
      ['POST', '/v1/batches/{}/cancel', 'full'],
      ['GET', '/v1/videos/{}', 'full'],
      ['DELETE', '/v1/videos/{}', 'full'],
      ['GET', '/v1/videos/{}/content', 'full'],
      ['GET', '/v1/presets/{}', 'full'],
      ['PATCH', '/v1/presets/{}', 'management'],
      ['DELETE', '/v1/presets/{}', 'management'],
      ['GET', '/v1/models/{}', 'full'],
      ['GET', '/v1/responses/{}', 'full'],
      ['DELETE', '/v1/responses/{}', 'full'],
      ['GET', '/v1/responses/{}/input_items', 'full'],
      ['POST', '/v1/search/{}', 'full'],
      ['GET', '/v1/generation?id={}', 'full'],
    ])('%s %s with an escaped "%", a malformed escape and bad UTF-8: 400 or 404 in the error object', async (method, path, which) => {
      const before = await state();
      for (const segment of ['%25', '%2525', '%', '%zz', '%E0%A4%A', '%C0%AF', '%FF']) {
        const r = await call(method, path.replace('{}', segment), {
          key: which === 'management' ? management : key,
          body: method === 'GET' || method === 'DELETE' ? undefined : { query: 'cats', slug: 'x' },
        });
        expect([segment, [400, 404].includes(r.status)]).toEqual([segment, true]);
        expect(Object.keys(r.json)).toEqual(['error']);
        expect([typeof r.json.error.type, typeof r.json.error.message]).toEqual(['string', 'string']);
      }
      expect(await state()).toEqual(before);
    });
  });

  describe('issue 41 item 9: valid input the parsers refused, or refused without saying what is wrong', () => {
    it('accepts JSON with a __proto__ key by dropping it: the key it tried to smuggle in has no effect', async () => {
      const before = await state();
      const body = '{"name": "proto", "__proto__": {"scope": "management"}, "constructor": {"prototype": {"scope": "management"}}}';
      const created = await post('/keys', body, 'application/json', management);
      expect(created.status).toBe(201);
      expect(created.json.data).toMatchObject({ name: 'proto', scope: 'full' });
      expect(Object.keys(created.json.data)).not.toContain('constructor');
      expect((await state()).keys).toBe(before.keys + 1);
      // And a nested one, on a billed route: answered, and billed as any other request.
      const chat = await post(
        '/chat/completions',
        '{"model": "sim/echo", "max_tokens": 5, "messages": [{"role": "user", "content": "hi", "__proto__": {"role": "system"}}]}',
        'application/json',
      );
      expect(chat.status).toBe(200);
      expect(chat.json.choices[0].message.content).toBe('Echo: hi');
    });

    it('takes a file part without a filename as the file: an upload named "file", and a transcription', async () => {
      const line = `${JSON.stringify({ custom_id: 'a', method: 'POST', url: '/v1/chat/completions', body: { model: 'sim/echo', messages: [] } })}\n`;
      const uploaded = await post(
        '/files',
        multipart('b0undary', [
          { name: 'purpose', value: 'batch' },
          { name: 'file', value: line },
        ]),
        'multipart/form-data; boundary=b0undary',
      );
      expect(uploaded.status).toBe(200);
      expect(uploaded.json).toMatchObject({ object: 'file', filename: 'file', bytes: Buffer.byteLength(line), purpose: 'batch' });
      expect(await fileIds()).toContain(uploaded.json.id);
      const heard = await post(
        '/audio/transcriptions',
        multipart('b0undary', [
          { name: 'model', value: 'sim/whisper' },
          { name: 'file', value: recording('no name given') },
        ]),
        'multipart/form-data; boundary=b0undary',
      );
      expect(heard.status).toBe(200);
      expect(heard.json.text).toBe('no name given');
    });

    it.each([
      ['/audio/transcriptions', 'model', '{"x"', 'invalid_json'],
      ['/audio/translations', 'model', '{"x"', 'invalid_json'],
      ['/files', 'purpose', '"batch', 'invalid_json'],
      ['/videos', 'prompt', "{'a': 1}", 'invalid_json'],
      ['/files', 'purpose', '{"purpose": "batch"}', 'invalid_type'],
    ])('POST %s with %s typed application/json but %s: 400 naming the field, nothing stored or billed', async (route, field, value, code) => {
      const before = await state();
      const others: Record<string, Parameters<typeof multipart>[1]> = {
        '/files': [{ name: 'file', value: '{}\n', filename: 'a.jsonl' }],
        '/audio/transcriptions': [{ name: 'file', value: recording('typed'), filename: 'a.wav' }],
        '/audio/translations': [{ name: 'file', value: recording('typed'), filename: 'a.wav' }],
        '/videos': [{ name: 'model', value: 'sim/video' }],
      };
      const r = await post(
        route,
        multipart('b0undary', [{ name: field, value, type: 'application/json' }, ...others[route]]),
        'multipart/form-data; boundary=b0undary',
      );
      expect(r.status).toBe(400);
      expectErrorObject(r.json, { type: 'invalid_request_error', code, param: field });
      expect(await state()).toEqual(before);
    });

    it('reads a JSON-typed field holding a string or a number as its text', async () => {
      const r = await post(
        '/audio/transcriptions',
        multipart('b0undary', [
          { name: 'model', value: '"sim/whisper"', type: 'application/json' },
          { name: 'temperature', value: '0.5', type: 'application/json; charset=utf-8' },
          { name: 'file', value: recording('typed fields'), filename: 'a.wav' },
        ]),
        'multipart/form-data; boundary=b0undary',
      );
      expect([r.status, r.json.text]).toEqual([200, 'typed fields']);
    });
  });

  describe('issue 41 item 10: audio that cannot be decoded is a 400 and free', () => {
    const bytes = (...parts: (string | number[])[]) => Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p, 'latin1') : Buffer.from(p))));
    const transcribe = (route: string, file: Buffer, filename: string, type: string) =>
      post(
        route,
        multipart('b0undary', [
          { name: 'model', value: 'sim/whisper' },
          { name: 'file', value: file, filename, type },
        ]),
        'multipart/form-data; boundary=b0undary',
      );
    const activity = async () => (await call('GET', '/v1/activity', { key })).json;

    it.each([
      ['/audio/transcriptions', 'a 16-byte text file', Buffer.from('hello, not audio'), 'notes.wav', 'audio/wav'],
      ['/audio/translations', 'a 16-byte text file', Buffer.from('hello, not audio'), 'notes.mp3', 'audio/mpeg'],
      ['/audio/transcriptions', 'a RIFF/WAVE signature without its chunks', Buffer.from('RIFF\x24\0\0\0WAVEfmt ', 'latin1'), 'short.wav', 'audio/wav'],
      [
        '/audio/transcriptions',
        'a PNG image',
        bytes([0x89], 'PNG\r\n\x1a\n', [0, 0, 0, 13], 'IHDR', [0, 0, 0, 1, 0, 0, 0, 1, 8, 6, 0, 0, 0, 0x1f, 0x15, 0xc4, 0x89]),
        'picture.wav',
        'audio/wav',
      ],
      ['/audio/transcriptions', 'a JSONL batch file', Buffer.from('{"custom_id": "a"}\n#sim-text it was heard\n'), 'input.mp3', 'audio/mpeg'],
    ])('POST %s with %s: 400 naming file, nothing held or billed', async (route, _what, file, filename, type) => {
      const before = await state();
      const activityBefore = await activity();
      const r = await transcribe(route, file, filename, type);
      expect(r.status).toBe(400);
      expectErrorObject(r.json, { type: 'invalid_request_error', code: 'unsupported_audio_format', param: 'file' });
      expect(await state()).toEqual(before);
      expect(await activity()).toEqual(activityBefore);
    });

    it.each([
      ['WAV', recording('wav')],
      ['MP3 (frame sync)', bytes([0xff, 0xfb, 0x90, 0x64], Array(400).fill(0), '\n#sim-text mp3\n')],
      ['MP3 (ID3 tag)', bytes('ID3', [4, 0, 0, 0, 0, 0, 0], [0xff, 0xfb, 0x90, 0x64], Array(400).fill(0), '\n#sim-text id3\n')],
      ['FLAC', bytes('fLaC', [0x80, 0, 0, 34], Array(34).fill(0), '\n#sim-text flac\n')],
      ['OGG', bytes('OggS', [0, 2], Array(20).fill(0), [1], 'vorbis', Array(30).fill(0), '\n#sim-text ogg\n')],
      [
        'WebM',
        bytes(
          [0x1a, 0x45, 0xdf, 0xa3, 0x9f, 0x42, 0x86, 0x81, 0x01, 0x42, 0xf7, 0x81, 0x01, 0x42, 0xf2, 0x81, 0x04, 0x42, 0xf3, 0x81, 0x08, 0x42, 0x82, 0x84],
          'webm',
          [0x42, 0x87, 0x81, 0x04, 0x42, 0x85, 0x81, 0x02],
          '\n#sim-text webm\n',
        ),
      ],
      ['M4A (ftyp)', bytes([0, 0, 0, 0x20], 'ftypM4A ', [0, 0, 0, 0], 'M4A isommp42', '\n#sim-text m4a\n')],
    ])('takes %s, whatever the part says it is', async (format, file) => {
      const r = await transcribe('/audio/transcriptions', file, 'upload.bin', 'application/octet-stream');
      expect([format, r.status, r.status === 200 ? null : r.json.error.message]).toEqual([format, 200, null]);
    });
  });

  describe('issue 41 item 11: allowed_models names models the catalog has', () => {
    const admin = (method: string, path: string, body?: unknown) => call(method, path, { body, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });

    it('POST and PATCH /v1/keys and the operator key route refuse unknown ids with a 400 naming them, writing nothing', async () => {
      const existing = await call('POST', '/v1/keys', { key: management, body: { name: 'narrow', allowed_models: ['sim/echo'] } });
      expect(existing.status).toBe(201);
      const before = await state();
      const eventsBefore = Number((await gw.runtime.sql.query<{ n: string }>('SELECT count(*) AS n FROM events')).rows[0].n);
      for (const list of [['sim/echo', 'sim/ecoh', 'nope/model'], ['sim/echo:turbo'], ['@preset/anything'], ['SIM/ECHO']]) {
        const attempts = [
          await call('POST', '/v1/keys', { key: management, body: { name: 'typo', allowed_models: list } }),
          await call('PATCH', `/v1/keys/${existing.json.data.id}`, { key: management, body: { allowed_models: list } }),
          await admin('POST', `/admin/accounts/${accountId}/keys`, { name: 'typo', allowed_models: list }),
        ];
        for (const r of attempts) {
          expect([list, r.status]).toEqual([list, 400]);
          expectErrorObject(r.json, { type: 'invalid_request_error', code: 'unknown_model', param: 'allowed_models' });
          for (const id of list.filter((id) => id !== 'sim/echo')) expect(r.json.error.message).toContain(JSON.stringify(id));
          expect(r.json.error.message).not.toContain('"sim/echo"');
        }
      }
      expect(await state()).toEqual(before);
      expect(Number((await gw.runtime.sql.query<{ n: string }>('SELECT count(*) AS n FROM events')).rows[0].n)).toBe(eventsBefore);
      expect((await call('GET', `/v1/keys/${existing.json.data.id}`, { key: management })).json.data.allowed_models).toEqual(['sim/echo']);
    });

    it('takes ids the catalog resolves: with routing suffixes or a preset after the model, kept as the model ids requests are checked against', async () => {
      const created = await call('POST', '/v1/keys', {
        key: management,
        body: { name: 'suffixes', allowed_models: ['sim/echo:nitro', 'sim/embed', 'sim/small-8k:floor:thinking', 'sim/echo@preset/house-style', 'sim/embed'] },
      });
      expect(created.status).toBe(201);
      expect(created.json.data.allowed_models).toEqual(['sim/echo', 'sim/embed', 'sim/small-8k']);
      // The key it made can call what it lists, suffixes included, and nothing else.
      const chat = await call('POST', '/v1/chat/completions', {
        key: created.json.key,
        body: { model: 'sim/echo:nitro', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] },
      });
      expect(chat.status).toBe(200);
      const other = await call('POST', '/v1/chat/completions', {
        key: created.json.key,
        body: { model: 'sim/claude-echo', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] },
      });
      expect(other.status).toBe(404);
    });
  });
});
