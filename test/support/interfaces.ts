import { parseFrames, type ParsedFrame } from '@svc/interfaces/testing/sse';
import { usdToNano } from '@svc/platform';
import { api, createAccountWithKey, type Call, type StartedGateway } from './gateway';

/** Helpers of the messages, responses and completions suites: raw streams, credits, generations, accounts. */

/** An SSE body as its frames, each parsed strictly (`event:` line, `data:` line, blank line). */
export function sseFrames(text: string): ParsedFrame[] {
  const frames = text.match(/[^]*?\n\n/g) ?? [];
  expect(frames.join('')).toBe(text);
  return parseFrames(frames);
}

/** A streamed POST read whole: status, headers and its frames. */
export async function rawStream(baseUrl: string, path: string, key: string, body: unknown, headers: Record<string, string> = {}) {
  const response = await fetch(`${baseUrl}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  expect(response.status).toBe(200);
  expect(response.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
  return { headers: response.headers, frames: sseFrames(text) };
}

export interface Credits {
  balance: number;
  held: number;
  open_holds: number;
}

export async function creditsOf(call: Call, key: string): Promise<Credits> {
  const r = await call('GET', '/credits', { key });
  expect(r.status).toBe(200);
  return r.json.data as Credits;
}

/** GET /v1/generation of one id: what the ledger recorded for it. */
export async function generationOf(call: Call, key: string, id: string) {
  const r = await call('GET', `/generation?id=${encodeURIComponent(id)}`, { key });
  expect(r.status).toBe(200);
  return r.json.data as { id: string; endpoint: string; status: string; tokens_prompt: number; tokens_completion: number; total_cost: number };
}

/**
 * The generation billed exactly the cost the answer reported, under the interface's endpoint,
 * and the balance went down by exactly that since `before`.
 */
export async function expectBilled(call: Call, key: string, id: string, cost: number, endpoint: string, before: Credits): Promise<void> {
  expect(cost).toBeGreaterThan(0);
  const generation = await generationOf(call, key, id);
  expect(generation).toMatchObject({ id, endpoint, status: 'completed', total_cost: cost });
  const after = await creditsOf(call, key);
  expect(usdToNano(before.balance) - usdToNano(after.balance)).toBe(usdToNano(cost));
  expect(after.held).toBe(0);
}

/** What `promise` was rejected with, checked to be an instance of `type` (an SDK's error class). */
export async function rejectionOf<T>(promise: Promise<unknown>, type: abstract new (...args: any[]) => T): Promise<T> {
  const err = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(type);
  return err as T;
}

/** A new account (with `credits` USD) and a key of it, through the operator API. */
export function accountWithKey(gw: StartedGateway, credits: number, keySettings: object = {}): Promise<{ accountId: string; key: string }> {
  // The operator API is not under /v1.
  return createAccountWithKey(api(gw.url.replace(/\/v1$/, '')), gw.keys.admin_token, credits, keySettings);
}
