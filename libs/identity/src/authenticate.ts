import { ApiError } from '../../platform/src/errors';
import type { KeyEnvironment, KeyScope } from './key';
import { hashesEqual, hashKeySecret, isKeySecretShape } from './secrets';

export interface KeyRecord {
  keyId: string;
  accountId: string;
  scope: KeyScope;
  environment: KeyEnvironment;
  secretHash: string;
  revoked: boolean;
}

export interface Caller {
  keyId: string;
  accountId: string;
  scope: KeyScope;
  environment: KeyEnvironment;
}

/** Spec 5.1: `Authorization: Bearer <key>` or `x-api-key: <key>`, on every endpoint. */
export function keyFromHeaders(headers: Record<string, string | string[] | undefined>): string | null {
  const auth = headers['authorization'];
  if (typeof auth === 'string') {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(auth);
    if (m) return m[1];
  }
  const xApiKey = headers['x-api-key'];
  return typeof xApiKey === 'string' && xApiKey.trim() !== '' ? xApiKey.trim() : null;
}

/**
 * Spec 5.5: missing, invalid, revoked or expired keys are 401 `authentication_error`; the
 * message never says which, so a caller cannot probe for revoked keys.
 */
export async function authenticate(secret: string | null, lookup: (hash: string) => Promise<KeyRecord | null>): Promise<Caller> {
  if (secret === null) throw ApiError.authentication('Missing API key: send it as "Authorization: Bearer <key>" or "x-api-key".', 'missing_api_key');
  if (!isKeySecretShape(secret)) throw ApiError.authentication('Invalid API key.');
  const hash = hashKeySecret(secret);
  const record = await lookup(hash);
  if (!record || !hashesEqual(record.secretHash, hash) || record.revoked) throw ApiError.authentication('Invalid API key.');
  return { keyId: record.keyId, accountId: record.accountId, scope: record.scope, environment: record.environment };
}
