import { modelNotFound } from '@svc/catalog';
import type { AppliedGuardrail } from '@svc/guardrails';
import { ApiError } from '@svc/platform';
import type { StoredPreset } from '@svc/presets';
import type { KeySettings } from './key';
import { ipAllowed, referrerAllowed } from './restrictions';
import { hashesEqual, hashKeySecret, isKeySecretShape } from './secrets';

/** A key as the read model knows it. */
export interface KeyRecord extends KeySettings {
  keyId: string;
  /** The account billed: the workspace owner. */
  accountId: string;
  workspaceId: string;
  orgId: string | null;
  createdBy: string;
  secretHint: string;
  createdAt: string;
  updatedAt: string;
  revokedAt: string | null;
}

/** What a secret's lookup finds: the key, and how long this particular secret works. */
export interface SecretMatch extends KeyRecord {
  /**
   * The billed account's own provider keys (bring your own key), still sealed, by provider.
   * Read with the key on every request, in the same query, so a deleted one stops being used
   * at once without a read of its own.
   */
  sealedProviderKeys: ReadonlyMap<string, string>;
  /**
   * Spec 1: how many days the account keeps prompt logs when prompt logging is on; null when it
   * is off. Read with the key, so a request pays no read of its own to know.
   */
  promptLogDays: number | null;
  /**
   * The workspace's presets at their latest version, by slug (spec 2.5: requests always use the
   * latest). With the key, so a request using one pays no read, and a change reaches every
   * process through the same invalidation as a key change.
   */
  presets: ReadonlyMap<string, StoredPreset>;
  /**
   * Issue 44: the guardrails that apply to the key (the organization's, its member's, its own),
   * widest first; read with the key, so a change to them reaches every process as a key change does.
   */
  guardrails: readonly AppliedGuardrail[];
  /** The stored hash the lookup matched, compared again here in constant time. */
  secretHash: string;
  /** Until when this secret works (a rotated-out secret); null = while the key lives. */
  secretValidUntil: string | null;
  /** False when the key's organization was deleted or its creator left it. */
  orgActive: boolean;
}

/** The authenticated caller of a request: its key, and its account's sealed provider keys. */
export type Caller = KeyRecord & Pick<SecretMatch, 'sealedProviderKeys' | 'promptLogDays' | 'presets' | 'guardrails'>;

/** Spec 5.1: `Authorization: Bearer <key>` or `x-api-key: <key>`, on every endpoint. */
export function keyFromHeaders(rawHeaders: readonly string[]): string | null {
  // Node keeps only the first Authorization header and joins repeated x-api-key ones, so the
  // raw list is what shows a request carrying two keys.
  const authorization: string[] = [];
  const xApiKey: string[] = [];
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = rawHeaders[i].toLowerCase();
    if (name === 'authorization') authorization.push(rawHeaders[i + 1]);
    else if (name === 'x-api-key') xApiKey.push(rawHeaders[i + 1]);
  }
  if (authorization.length > 1) throw ambiguous('The request carries more than one Authorization header; send one.', 'Authorization');
  if (xApiKey.length > 1) throw ambiguous('The request carries more than one x-api-key header; send one.', 'x-api-key');
  const bearer = authorization.length === 1 ? /^Bearer\s+(\S+)\s*$/i.exec(authorization[0])?.[1] : undefined;
  const header = xApiKey.length === 1 && xApiKey[0].trim() !== '' ? xApiKey[0].trim() : undefined;
  // Guessing which of two different keys was meant could bill the wrong account.
  if (bearer !== undefined && header !== undefined && bearer !== header) {
    throw ambiguous('Authorization and x-api-key carry different keys; send one key.', 'x-api-key');
  }
  return bearer ?? header ?? null;
}

function ambiguous(message: string, param: string): ApiError {
  return ApiError.invalidRequest(message, param, 'ambiguous_api_key');
}

/**
 * Spec 5.5: missing, invalid, revoked or expired keys are 401 `authentication_error`. A revoked
 * key reads as invalid, so nobody can probe which keys once existed; an expired key says so,
 * which only its holder can learn.
 */
export async function authenticate(secret: string | null, lookup: (hash: string) => Promise<SecretMatch | null>, now: Date): Promise<Caller> {
  if (secret === null) throw ApiError.authentication('Missing API key: send it as "Authorization: Bearer <key>" or "x-api-key".', 'missing_api_key');
  if (!isKeySecretShape(secret)) throw ApiError.authentication('Invalid API key.');
  const hash = hashKeySecret(secret);
  const match = await lookup(hash);
  const refusal = secretRefusal(match, hash, now);
  if (refusal) throw refusal;
  const { secretHash: _hash, secretValidUntil: _until, orgActive: _active, ...caller } = match!;
  return caller;
}

/**
 * Spec 5.5 for a secret already looked up: why it no longer works at `now` (unknown, revoked,
 * its organization gone, rotated out past its grace, expired), or null while it works. A live
 * realtime session asks this again for the secret it was opened with (issue 41 S1).
 */
export function secretRefusal(match: SecretMatch | null, hash: string, now: Date): ApiError | null {
  const at = now.getTime();
  if (
    !match ||
    !hashesEqual(match.secretHash, hash) ||
    match.revokedAt !== null ||
    !match.orgActive ||
    (match.secretValidUntil !== null && Date.parse(match.secretValidUntil) <= at)
  ) {
    return ApiError.authentication('Invalid API key.');
  }
  if (match.expires_at !== null && Date.parse(match.expires_at) <= at) return ApiError.authentication('This API key has expired.', 'key_expired');
  return null;
}

/** What a route does, for spec 5.3 and 5.6. */
export type Operation = 'model_call' | 'lookup' | 'management';

export interface RequestOrigin {
  ip: string;
  origin?: string;
  referer?: string;
}

/**
 * Spec 5.3-5.6 and 7 (403 row): restrictions first (the key is used from the wrong place),
 * then what the key's scope allows.
 */
export function authorize(caller: Caller, operation: Operation, from: RequestOrigin): void {
  if (caller.allowed_ips && !ipAllowed(from.ip, caller.allowed_ips)) {
    throw ApiError.permission(`This key may not be used from ${from.ip}.`, 'ip_not_allowed');
  }
  if (caller.allowed_referrers && !referrerAllowed(from.origin, from.referer, caller.allowed_referrers)) {
    throw ApiError.permission('This key may only be used from its allowed domains (checked against Origin, then Referer).', 'referrer_not_allowed');
  }
  switch (operation) {
    case 'model_call':
      if (caller.scope === 'management')
        throw ApiError.permission('A management key cannot call models; use a full key.', 'management_key_used_for_model_call');
      if (caller.scope === 'read_only')
        throw ApiError.permission('A read-only key can only read: it cannot make billed calls or change or delete anything.', 'read_only_key');
      return;
    case 'management':
      if (caller.scope !== 'management') throw ApiError.permission('This operation needs a management key.', 'management_key_required');
      return;
    case 'lookup':
      return;
  }
}

export function assertModelAllowed(caller: Caller, modelId: string): void {
  if (caller.allowed_models && !caller.allowed_models.includes(modelId)) throw modelNotFound(modelId);
}
