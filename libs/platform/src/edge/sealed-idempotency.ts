import { openSecret, sealSecret } from '../crypto';
import type { IdempotencyBegin, IdempotencyStore, StoredResponse } from './idempotency';

/**
 * An idempotency store for answers that carry a secret (a new API key's, returned only once):
 * the store underneath, Redis or memory, only ever holds the answer sealed with AES-256-GCM
 * under SVC_ENCRYPTION_KEY (../crypto.ts), so a dump of Redis or of the process's heap does not
 * hand out working keys. Claims, conflicts, mismatches and retention are the inner store's,
 * unchanged.
 */
export class SealedIdempotencyStore implements IdempotencyStore {
  constructor(
    private readonly inner: IdempotencyStore,
    private readonly encryptionKey: Buffer,
  ) {}

  async begin(scope: string, key: string, fingerprint: string, lockMs: number): Promise<IdempotencyBegin> {
    const begun = await this.inner.begin(scope, key, fingerprint, lockMs);
    if (begun.state !== 'replay') return begun;
    // Throws SecretDecryptionError when SVC_ENCRYPTION_KEY changed since: replaying nothing is
    // right, running the request again would do twice what the client asked for once.
    return { state: 'replay', response: openResponse(this.encryptionKey, begun.response, sealedResponseContext(scope, key, fingerprint)) };
  }

  complete(scope: string, key: string, fingerprint: string, response: StoredResponse): Promise<void> {
    return this.inner.complete(scope, key, fingerprint, sealResponse(this.encryptionKey, response, sealedResponseContext(scope, key, fingerprint)));
  }

  abandon(scope: string, key: string): Promise<void> {
    return this.inner.abandon(scope, key);
  }
}

/**
 * Bound in as additional data: a sealed answer opens only as the answer to that request
 * (body fingerprint) under that Idempotency-Key of that API key, so one copied into another
 * entry does not open. JSON, since scope and key are free text and must not splice.
 */
export function sealedResponseContext(scope: string, key: string, fingerprint: string): string {
  return `idempotent-response:${JSON.stringify([scope, key, fingerprint])}`;
}

/** Whatever the answer's headers or id might hold goes inside the seal too; status and kind say nothing. */
interface SealedPart {
  headers: Record<string, string>;
  body: string;
  sourceId: string;
}

function sealResponse(encryptionKey: Buffer, response: StoredResponse, context: string): StoredResponse {
  const part: SealedPart = { headers: response.headers, body: response.body, sourceId: response.sourceId };
  return { status: response.status, kind: response.kind, headers: {}, sourceId: '', body: sealSecret(encryptionKey, JSON.stringify(part), context) };
}

function openResponse(encryptionKey: Buffer, sealed: StoredResponse, context: string): StoredResponse {
  const part = JSON.parse(openSecret(encryptionKey, sealed.body, context)) as SealedPart;
  return { status: sealed.status, kind: sealed.kind, headers: part.headers, body: part.body, sourceId: part.sourceId };
}
