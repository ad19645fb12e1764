import { readFileSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { BUILTIN_CATALOG_PATH } from '@svc/catalog';

export const OPERATOR_KEY = 'sk-operator-0000000000000000';
export const CALLER_KEY = 'sk-caller-1111111111111111wxyz';
export const REJECTED_KEY = 'sk-revoked-2222222222222222';
// What the stub reports: 11 prompt and 7 completion tokens at the model's $2 / $8 per M.
export const USAGE = { prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 };

/**
 * A stand-in for a model provider: answers like OpenAI, remembers the Authorization header of
 * each call, and rejects REJECTED_KEY with a 401 as OpenAI does for a revoked key.
 */
export async function startUpstream(): Promise<{ url: string; seen: string[]; close(): Promise<void> }> {
  const seen: string[] = [];
  const body = async (req: IncomingMessage) => {
    let text = '';
    for await (const chunk of req) text += chunk;
    return JSON.parse(text) as { stream?: boolean; model: string };
  };
  const server: Server = createServer(async (req, res) => {
    const request = await body(req);
    seen.push(String(req.headers.authorization));
    if (req.headers.authorization === `Bearer ${REJECTED_KEY}`) {
      res.writeHead(401, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: 'Incorrect API key provided.', type: 'invalid_request_error', code: 'invalid_api_key' } }));
      return;
    }
    const base = { id: 'chatcmpl-stub', created: 1, model: request.model };
    if (request.stream) {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(
        `data: ${JSON.stringify({ ...base, object: 'chat.completion.chunk', choices: [{ index: 0, delta: { role: 'assistant', content: 'hi' }, finish_reason: null }] })}\n\n`,
      );
      res.write(`data: ${JSON.stringify({ ...base, object: 'chat.completion.chunk', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })}\n\n`);
      res.write(`data: ${JSON.stringify({ ...base, object: 'chat.completion.chunk', choices: [], usage: USAGE })}\n\n`);
      res.end('data: [DONE]\n\n');
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        ...base,
        object: 'chat.completion',
        choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop' }],
        usage: USAGE,
      }),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    seen,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** The built-in catalog plus `test/byok`, served by the stub provider `stub` on the operator's key. */
export function catalogWithStub(dir: string, upstreamUrl: string): string {
  const catalog = parse(readFileSync(BUILTIN_CATALOG_PATH, 'utf8'));
  catalog.providers.stub = { adapter: 'openai', base_url: upstreamUrl, api_key: OPERATOR_KEY };
  const echo = catalog.models.find((m: { id: string }) => m.id === 'sim/echo');
  catalog.models.push({ ...echo, id: 'test/byok', name: 'BYOK test', providers: [{ provider: 'stub', upstream_model: 'stub-model' }] });
  const path = join(dir, 'catalog.yaml');
  writeFileSync(path, stringify(catalog));
  return path;
}
