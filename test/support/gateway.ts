import OpenAI from 'openai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '@svc/platform';
import { freshPgRunner } from '@svc/platform/testing/pg';
import { startAll, type Started } from '../../src/main';
import type { Runtime, RuntimeOptions } from '@svc/runtime';
import { costOfMeters, tokenWorstCase } from '@svc/metering';
import { countChatPromptTokens } from '@svc/providers';
import { seedPglite } from './pglite-template';

/**
 * Test keys (the dev key among them) get limits no suite reaches by accident: a suite makes
 * more than 60 requests a minute on one key. The rate limit suites set their own.
 */
export const UNLIMITED_TEST_KEYS = { SVC_RATE_LIMITS_TEST: 'rpm=1000000,tpm=1000000000,concurrent=100000', SVC_AUTH_FAILURE_LIMIT: '1000000' };

/**
 * Starts the whole service (gateway, projections, simulated upstream) on the embedded
 * defaults in a fresh data directory, on an ephemeral port.
 */
export async function startGateway(env: Record<string, string> = {}, dataDir = mkdtempSync(join(tmpdir(), 'svc-e2e-')), options: RuntimeOptions = {}) {
  const config = loadConfig({ SVC_DATA_DIR: dataDir, PORT: '0', ...UNLIMITED_TEST_KEYS, ...env });
  if (!config.databaseUrl && !options.inMemory) seedPglite(dataDir);
  const started: Started = await startAll(config, { logger: false, ...options });
  return Object.assign(started, {
    dataDir,
    removeDataDir: () => rmSync(dataDir, { recursive: true, force: true }),
  });
}

/** A fetch against the gateway that returns status, headers and parsed JSON. */
export type Call = ReturnType<typeof api>;

/** A PostgreSQL URL on the run's database whose search_path is a fresh schema. */
export async function freshPgSchemaUrl(prefix: string): Promise<string> {
  const runner = await freshPgRunner(prefix);
  await runner.close();
  const url = new URL(process.env.DATABASE_URL!);
  url.searchParams.set('options', `-c search_path=${runner.schema}`);
  return url.toString();
}

export function api(baseUrl: string) {
  return async (method: string, path: string, { key, body, headers = {} }: { key?: string; body?: unknown; headers?: Record<string, string> } = {}) => {
    const response = await fetch(`${baseUrl}${path}`, {
      method,
      headers: {
        ...(key ? { authorization: `Bearer ${key}` } : {}),
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        ...headers,
      },
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    });
    const text = await response.text();
    let json: any = null;
    try {
      json = JSON.parse(text);
    } catch {
      json = text;
    }
    return { status: response.status, headers: response.headers, json };
  };
}

/**
 * What the gateway holds for a chat request (spec 1, rule 1): the worst case at the dearest
 * provider of the model, since any of them may answer.
 */
export function chatWorstCase(runtime: Runtime, modelId: string, messages: unknown[], maxTokens: number | null): bigint {
  const prompt = countChatPromptTokens(messages);
  return runtime.catalog
    .get(modelId)!
    .providers.map((route) => costOfMeters(tokenWorstCase(prompt, maxTokens), route.prices))
    .reduce((a, b) => (b > a ? b : a));
}

export type StartedGateway = Awaited<ReturnType<typeof startGateway>>;

/** A gateway on embedded defaults, the official openai SDK on its dev key, and a raw caller. */
export async function startWithClient(env: Record<string, string> = {}, dataDir?: string, options: RuntimeOptions = {}) {
  const gw = await startGateway(env, dataDir, options);
  return { gw, client: new OpenAI({ baseURL: gw.url, apiKey: gw.keys.api_key, maxRetries: 0 }), call: api(gw.url) };
}

/** A new account (with `credits` USD) and a key of it, through the operator API (`call` from the root, not /v1). */
export async function createAccountWithKey(
  call: Call,
  adminToken: string,
  credits: number,
  keySettings: object = {},
): Promise<{ accountId: string; key: string }> {
  const admin = { authorization: `Bearer ${adminToken}` };
  const account = await call('POST', '/admin/accounts', { body: { initial_credits_usd: credits }, headers: admin });
  expect(account.status).toBe(201);
  const key = await call('POST', `/admin/accounts/${account.json.id}/keys`, { body: keySettings, headers: admin });
  expect(key.status).toBe(201);
  return { accountId: account.json.id as string, key: key.json.key as string };
}

export async function stopGateway(gw: StartedGateway | undefined): Promise<void> {
  await gw?.close();
  gw?.removeDataDir();
}
