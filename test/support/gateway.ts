import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../libs/platform/src/config';
import { startAll, type Started } from '../../src/main';

/**
 * Starts the whole service (gateway, projections, simulated upstream) on the embedded
 * defaults in a fresh data directory, on an ephemeral port.
 */
export async function startGateway(env: Record<string, string> = {}, dataDir = mkdtempSync(join(tmpdir(), 'svc-e2e-'))) {
  const config = loadConfig({ SVC_DATA_DIR: dataDir, PORT: '0', ...env });
  const started: Started = await startAll(config, { logger: false });
  return Object.assign(started, {
    dataDir,
    removeDataDir: () => rmSync(dataDir, { recursive: true, force: true }),
  });
}

/** A fetch against the gateway that returns status, headers and parsed JSON. */
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
