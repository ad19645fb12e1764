import type { INestApplicationContext } from '@nestjs/common';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { AdminService, KeysService } from '@svc/management';
import type { Config } from '@svc/platform';
import { generateEncryptionKey } from '@svc/platform';

export interface DevKeys {
  account_id: string;
  management_key: string;
  /** A full test key: test keys have low rate limits (60 requests a minute, 8 at once by default). */
  api_key: string;
  /** A full live key, with the live limits (600 requests a minute, 64 at once by default): for scripts. */
  live_api_key: string;
  admin_token: string;
}

export const DEV_CREDITS_USD = 10;

export function devKeysPath(dataDir: string): string {
  return join(dataDir, 'dev-keys.json');
}

export function readDevKeys(dataDir: string): DevKeys | null {
  const path = devKeysPath(dataDir);
  return existsSync(path) ? (JSON.parse(readFileSync(path, 'utf8')) as DevKeys) : null;
}

/** SVC_ADMIN_TOKEN, else the dev token of the data directory, else a new one. */
export function devAdminToken(config: Config): string {
  return config.adminToken ?? readDevKeys(config.dataDir)?.admin_token ?? randomBytes(24).toString('base64url');
}

export function devEncryptionKeyPath(dataDir: string): string {
  return join(dataDir, 'encryption.key');
}

/**
 * SVC_ENCRYPTION_KEY, else the dev key of the data directory, else a new one written there
 * (mode 0600) so that provider keys saved in one run still open in the next. Only `npm start`
 * (startAll) does this: the production gateway without SVC_ENCRYPTION_KEY refuses BYOK
 * instead, since a key generated next to the data it protects protects nothing.
 */
export function devEncryptionKey(config: Config): Buffer {
  if (config.encryptionKey) return config.encryptionKey;
  const path = devEncryptionKeyPath(config.dataDir);
  if (!existsSync(path)) {
    mkdirSync(config.dataDir, { recursive: true });
    try {
      // 'wx': of two processes starting at once, one writes and the other reads its key.
      writeFileSync(path, `${generateEncryptionKey()}\n`, { mode: 0o600, flag: 'wx' });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
  const key = Buffer.from(readFileSync(path, 'utf8').trim(), 'base64');
  if (key.length !== 32) throw new Error(`${path} does not hold a 32-byte base64 key; delete it to generate a new one (saved provider keys are then lost).`);
  return key;
}

/**
 * First start on an empty data directory: a dev account with $10.00 of credits, a management
 * key and a full test key, created through the operator API's own services and written to
 * dev-keys.json. Later starts reuse that file.
 */
export async function ensureDevKeys(app: INestApplicationContext, config: Config, adminToken: string): Promise<{ keys: DevKeys; created: boolean }> {
  const admin = app.get(AdminService);
  const keys = app.get(KeysService);
  const metadata = { actor: 'dev-bootstrap' };
  const liveKey = async (accountId: string) =>
    (await keys.create(await admin.keyOwner(accountId, undefined), { name: 'dev live key', scope: 'full', environment: 'live' }, metadata)).secret;

  const existing = readDevKeys(config.dataDir);
  if (existing) {
    if (existing.live_api_key) return { keys: existing, created: false };
    // A data directory from before the live key: it gets one, once.
    const upgraded = { ...existing, live_api_key: await liveKey(existing.account_id) };
    writeDevKeys(config.dataDir, upgraded);
    return { keys: upgraded, created: false };
  }

  const accountId = await admin.createAccount(DEV_CREDITS_USD, metadata);
  const owner = await admin.keyOwner(accountId, undefined);
  const management = await keys.create(owner, { name: 'dev management key', scope: 'management', environment: 'test' }, metadata);
  const full = await keys.create(owner, { name: 'dev key', scope: 'full', environment: 'test' }, metadata);
  const created: DevKeys = {
    account_id: accountId,
    management_key: management.secret,
    api_key: full.secret,
    live_api_key: await liveKey(accountId),
    admin_token: adminToken,
  };
  writeDevKeys(config.dataDir, created);
  return { keys: created, created: true };
}

function writeDevKeys(dataDir: string, keys: DevKeys): void {
  mkdirSync(dataDir, { recursive: true });
  writeFileSync(devKeysPath(dataDir), `${JSON.stringify(keys, null, 2)}\n`, { mode: 0o600 });
}
