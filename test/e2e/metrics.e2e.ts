import { tone, wav } from '@svc/providers';
import { api, startGateway, stopGateway, type Call, type StartedGateway } from '../support/gateway';
import { until } from '../support/until';

/**
 * Issue 22: GET /metrics (Prometheus text format), authorised by the admin token on the main
 * port, or without one on SVC_METRICS_PORT; request, charge, hold and refusal figures that
 * move exactly as the requests made.
 */
const ADMIN_TOKEN = 'metrics-admin-token-0123456789';

/** Every sample of the exposition: metric name, its labels, its value. */
function samples(text: string): { name: string; labels: Record<string, string>; value: number }[] {
  const out = [];
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2];
    out.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return out;
}

/** The value of the series `name` with exactly `labels` (0 when it does not exist yet). */
function value(text: string, name: string, labels: Record<string, string> = {}): number {
  const want = JSON.stringify(Object.entries(labels).sort());
  const found = samples(text).filter((s) => s.name === name && JSON.stringify(Object.entries(s.labels).sort()) === want);
  expect(found.length).toBeLessThanOrEqual(1);
  return found[0]?.value ?? 0;
}

const chat = (content: string) => ({ model: 'sim/echo', messages: [{ role: 'user', content }], max_tokens: 20 });

describe('GET /metrics on the main port (issue 22)', () => {
  let gw: StartedGateway;
  let call: Call;
  let root: string;
  const scrape = async () => {
    const r = await fetch(`${root}/metrics`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    return r.text();
  };
  const series = { route: '/v1/chat/completions', method: 'POST', model: 'sim/echo' };

  beforeAll(async () => {
    gw = await startGateway({ SVC_ADMIN_TOKEN: ADMIN_TOKEN });
    root = gw.url.replace(/\/v1$/, '');
    call = api(root);
  });
  afterAll(() => stopGateway(gw));

  it('refuses a missing or wrong token with 401 and the error object', async () => {
    const none = await api(root)('GET', '/metrics');
    expect(none.status).toBe(401);
    expect(none.json.error).toMatchObject({ code: 'invalid_admin_token', type: 'authentication_error' });
    const wrong = await api(root)('GET', '/metrics', { headers: { authorization: `Bearer ${ADMIN_TOKEN}x` } });
    expect(wrong.status).toBe(401);
    expect(wrong.json.error.code).toBe('invalid_admin_token');
    // A model key is not the operator's token either.
    expect((await api(root)('GET', '/metrics', { key: gw.keys.api_key })).status).toBe(401);
  });

  it('counts exactly N completions and M 400s by route template, method, status and model; charges by their exact sum', async () => {
    const before = await scrape();
    const N = 3;
    const M = 2;
    const answers = await Promise.all(
      Array.from({ length: N }, (_, i) => call('POST', '/v1/chat/completions', { key: gw.keys.api_key, body: chat(`count me ${i}`) })),
    );
    for (const a of answers) expect(a.status).toBe(200);
    for (let i = 0; i < M; i++) {
      const bad = await call('POST', '/v1/chat/completions', { key: gw.keys.api_key, body: { model: 'sim/echo', messages: 'not a list' } });
      expect(bad.status).toBe(400);
    }
    // A model outside the catalog is never a label value.
    expect(
      (await call('POST', '/v1/chat/completions', { key: gw.keys.api_key, body: { model: 'nope/secret-string-42', messages: [] } })).status,
    ).toBeGreaterThanOrEqual(400);
    const after = await scrape();
    expect(value(after, 'svc_http_requests_total', { ...series, status: '200' }) - value(before, 'svc_http_requests_total', { ...series, status: '200' })).toBe(
      N,
    );
    expect(value(after, 'svc_http_requests_total', { ...series, status: '400' }) - value(before, 'svc_http_requests_total', { ...series, status: '400' })).toBe(
      M,
    );
    expect(after).not.toContain('secret-string-42');
    expect(
      value(after, 'svc_http_request_duration_seconds_count', { route: '/v1/chat/completions', method: 'POST' }) -
        value(before, 'svc_http_request_duration_seconds_count', { route: '/v1/chat/completions', method: 'POST' }),
    ).toBe(N + M + 1);

    const charged = answers.reduce((sum, a) => sum + BigInt(Math.round(a.json.usage.cost * 1e9)), 0n);
    expect(charged).toBeGreaterThan(0n);
    expect(value(after, 'svc_charges_total') - value(before, 'svc_charges_total')).toBe(N);
    expect(BigInt(value(after, 'svc_charged_nano_usd_total') - value(before, 'svc_charged_nano_usd_total'))).toBe(charged);
    // The upstream was called N times (the 400s never reached it), and it did not fail.
    const upstream = { provider: gw.runtime.catalog.get('sim/echo')!.providers[0].provider.name, operation: 'chat' };
    expect(value(after, 'svc_upstream_duration_seconds_count', upstream) - value(before, 'svc_upstream_duration_seconds_count', upstream)).toBe(N);
    expect(samples(after).filter((s) => s.name === 'svc_upstream_errors_total')).toEqual([]);
    // Every billed request appended (a hold and a charge), timed.
    expect(value(after, 'svc_event_store_append_seconds_count') - value(before, 'svc_event_store_append_seconds_count')).toBeGreaterThanOrEqual(2 * N);
  });

  // Issue 41 (24): neither a multipart form nor a search body has a JSON `model`; the label is
  // the model the request was billed for, not "".
  it('labels a transcription and a search with the model they were billed for', async () => {
    const before = await scrape();
    const form = new FormData();
    form.append('model', 'sim/whisper');
    form.append('file', new Blob([Buffer.concat([wav(tone(24_000)), Buffer.from('\n#sim-text label me\n')])], { type: 'audio/wav' }), 'a.wav');
    const heard = await fetch(`${gw.url}/audio/transcriptions`, { method: 'POST', headers: { authorization: `Bearer ${gw.keys.api_key}` }, body: form });
    expect(heard.status).toBe(200);
    const searched = await call('POST', '/v1/search/sim/tavily', { key: gw.keys.api_key, body: { query: 'labels' } });
    expect(searched.status).toBe(200);
    const byDefault = await call('POST', '/v1/search', { key: gw.keys.api_key, body: { query: 'labels' } });
    expect(byDefault.status).toBe(200);
    const after = await scrape();
    const moved = (labels: Record<string, string>) => value(after, 'svc_http_requests_total', labels) - value(before, 'svc_http_requests_total', labels);
    expect(moved({ route: '/v1/audio/transcriptions', method: 'POST', status: '200', model: 'sim/whisper' })).toBe(1);
    expect(moved({ route: '/v1/search/*', method: 'POST', status: '200', model: 'sim/tavily' })).toBe(1);
    expect(moved({ route: '/v1/search', method: 'POST', status: '200', model: byDefault.json.model })).toBe(1);
    expect(byDefault.json.model).toMatch(/^sim\//);
    expect(samples(after).filter((s) => s.name === 'svc_http_requests_total' && /search|transcriptions/.test(s.labels.route) && s.labels.model === '')).toEqual(
      [],
    );
  });

  it('an upstream failure is counted by provider and code', async () => {
    const before = await scrape();
    const failed = await call('POST', '/v1/chat/completions', { key: gw.keys.api_key, body: chat('fail please\n#sim {"fail": 503}') });
    expect(failed.status).toBeGreaterThanOrEqual(500);
    const after = await scrape();
    const provider = gw.runtime.catalog.get('sim/echo')!.providers[0].provider.name;
    expect(
      value(after, 'svc_upstream_errors_total', { provider, code: 'upstream_503' }) -
        value(before, 'svc_upstream_errors_total', { provider, code: 'upstream_503' }),
    ).toBeGreaterThanOrEqual(1);
  });

  it('labels routes by template, never the raw URL, and unknown routes as unmatched', async () => {
    const id = 'key_thisidmustnotbealabel';
    expect((await call('GET', `/v1/keys/${id}`, { key: gw.keys.management_key })).status).toBe(404);
    expect((await call('GET', '/v1/no-such-route-anywhere', { key: gw.keys.api_key })).status).toBe(404);
    const text = await scrape();
    expect(value(text, 'svc_http_requests_total', { route: '/v1/keys/{id}', method: 'GET', status: '404', model: '' })).toBeGreaterThanOrEqual(1);
    expect(value(text, 'svc_http_requests_total', { route: 'unmatched', method: 'GET', status: '404', model: '' })).toBeGreaterThanOrEqual(1);
    expect(text).not.toContain(id);
    expect(text).not.toContain('no-such-route-anywhere');
    expect(text).not.toContain(gw.keys.account_id);
    // Process metrics are there, with the prefix.
    expect(value(text, 'svc_process_cpu_user_seconds_total')).toBeGreaterThan(0);
  });

  it('open holds and the held amount are > 0 during a slow request and back to 0 after', async () => {
    const zero = async () => {
      const t = await scrape();
      return value(t, 'svc_open_holds') === 0 && value(t, 'svc_held_nano_usd') === 0 ? t : null;
    };
    await until('no open holds before', zero);
    const slow = call('POST', '/v1/chat/completions', { key: gw.keys.api_key, body: chat('slow\n#sim {"delay_ms": 1500}') });
    const during = await until('the hold to show', async () => {
      const t = await scrape();
      return value(t, 'svc_open_holds') === 1 ? t : null;
    });
    expect(value(during, 'svc_held_nano_usd')).toBeGreaterThan(0);
    expect((await slow).status).toBe(200);
    await until('the hold to be settled', zero);
  });

  it('a 429 moves the refusal counter by exactly one', async () => {
    const made = await call('POST', '/v1/keys', { key: gw.keys.management_key, body: { name: 'one a minute', rpm_limit: 1 } });
    expect(made.status).toBe(201);
    const key = made.json.key as string;
    const before = await scrape();
    expect((await call('POST', '/v1/chat/completions', { key, body: chat('first') })).status).toBe(200);
    const refused = await call('POST', '/v1/chat/completions', { key, body: chat('second') });
    expect(refused.status).toBe(429);
    expect(refused.json.error.code).toBe('requests_limit_exceeded');
    const after = await scrape();
    const code = { code: 'requests_limit_exceeded' };
    expect(value(after, 'svc_rate_limit_refusals_total', code) - value(before, 'svc_rate_limit_refusals_total', code)).toBe(1);
    expect(value(after, 'svc_http_requests_total', { ...series, status: '429' }) - value(before, 'svc_http_requests_total', { ...series, status: '429' })).toBe(
      1,
    );
  });

  it('scrape-time gauges are exposed: backlog, queues, projection lag', async () => {
    const text = await scrape();
    expect(samples(text).some((s) => s.name === 'svc_webhook_backlog')).toBe(true);
    expect(samples(text).find((s) => s.name === 'svc_job_queue_depth' && s.labels.queue === 'batch_lines')?.value).toBe(0);
    const lag = samples(text).filter((s) => s.name === 'svc_projection_lag_events');
    expect(lag.map((s) => s.labels.projection)).toContain('credits');
  });
});

describe('SVC_METRICS_PORT (issue 22)', () => {
  let gw: StartedGateway;
  beforeAll(async () => {
    gw = await startGateway({ SVC_ADMIN_TOKEN: ADMIN_TOKEN, SVC_METRICS_PORT: '0' });
  });
  afterAll(() => stopGateway(gw));

  it('serves /metrics on its own port without a token, and not on the main port', async () => {
    const root = gw.url.replace(/\/v1$/, '');
    expect((await fetch(`${root}/metrics`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).status).toBe(404);
    expect(gw.runtime.metricsPort).toBeGreaterThan(0);
    const own = `http://localhost:${gw.runtime.metricsPort}`;
    const before = await (await fetch(`${own}/metrics`)).text();
    expect((await api(root)('POST', '/v1/chat/completions', { key: gw.keys.api_key, body: chat('on the other port') })).status).toBe(200);
    const r = await fetch(`${own}/metrics`);
    expect(r.status).toBe(200);
    const after = await r.text();
    const s = { route: '/v1/chat/completions', method: 'POST', status: '200', model: 'sim/echo' };
    expect(value(after, 'svc_http_requests_total', s) - value(before, 'svc_http_requests_total', s)).toBe(1);
    // The main port's 404 for /metrics is counted as unmatched, like any unknown route.
    expect(value(after, 'svc_http_requests_total', { route: 'unmatched', method: 'GET', status: '404', model: '' })).toBeGreaterThanOrEqual(1);
    expect((await fetch(`${own}/other`)).status).toBe(404);
  });

  it('the runtime closes it', async () => {
    const port = gw.runtime.metricsPort;
    await gw.close();
    await expect(fetch(`http://localhost:${port}/metrics`)).rejects.toThrow();
    gw.close = async () => undefined;
  });
});
