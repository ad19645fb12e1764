import { api, startGateway, stopGateway, type Call, type StartedGateway } from '../support/gateway';

/**
 * Issue 41 S5, spec 4.3 and 4.4: POST /v1/messages/count_tokens checks images as POST
 * /v1/messages does: an image URL that is not https (spec 4.2 rule 5) is a 400 on both, in the
 * messages endpoint's error shape, and the same request with an https URL is counted.
 */
describe('count_tokens checks its input as the messages endpoint does (issue 41 S5)', () => {
  let gw: StartedGateway;
  let call: Call;
  let key: string;

  beforeAll(async () => {
    gw = await startGateway();
    call = api(gw.url);
    key = gw.keys.api_key;
  }, 60_000);
  afterAll(async () => {
    await stopGateway(gw);
  });

  const withImage = (url: string) => ({
    model: 'sim/echo',
    messages: [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'What is this?' },
          { type: 'image', source: { type: 'url', url } },
        ],
      },
    ],
  });

  it.each(['http://example.com/cat.png', 'ftp://example.com/cat.png', 'file:///etc/passwd'])('refuses the image URL %s as /v1/messages does', async (url) => {
    const counted = await call('POST', '/messages/count_tokens', { key, body: withImage(url) });
    const created = await call('POST', '/messages', { key, body: { ...withImage(url), max_tokens: 16 } });
    expect(created.status).toBe(400);
    expect(counted.status).toBe(400);
    expect(counted.json).toEqual(created.json);
    expect(counted.json.type).toBe('error');
    expect(counted.json.error.type).toBe('invalid_request_error');
    expect(counted.json.error.message).toContain('https');
  });

  it('counts the same request with an https image URL', async () => {
    const counted = await call('POST', '/messages/count_tokens', { key, body: withImage('https://example.com/cat.png') });
    expect(counted.status).toBe(200);
    expect(counted.json.input_tokens).toBeGreaterThan(0);
  });

  it('refuses an image for a model without image input, as /v1/messages does', async () => {
    const body = { ...withImage('https://example.com/cat.png'), model: 'sim/small-8k' };
    const counted = await call('POST', '/messages/count_tokens', { key, body });
    const created = await call('POST', '/messages', { key, body: { ...body, max_tokens: 16 } });
    expect(created.status).toBe(400);
    expect(counted.status).toBe(400);
    expect(counted.json).toEqual(created.json);
  });
});
