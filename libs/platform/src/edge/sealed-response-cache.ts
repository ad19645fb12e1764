import { isSealedSecret, openSecret, SecretDecryptionError, sealSecret } from '../crypto';
import type { StoredResponse } from './idempotency';
import type { CachedResponse, ResponseCache } from './response-cache';

/**
 * Issue 41 S4: the response cache holds answers to prompts, as prompt logs and stored responses
 * do, so its store (Redis, or this process's heap) only ever holds them sealed with AES-256-GCM
 * under SVC_ENCRYPTION_KEY, bound to the entry's cache key so one copied under another key does
 * not open. An entry that does not open (written before sealing, in plaintext, or under another
 * key) is a miss, and the request runs and replaces it: never a crash, never plaintext served.
 */
export class SealedResponseCache implements ResponseCache {
  constructor(
    private readonly inner: ResponseCache,
    private readonly encryptionKey: Buffer,
  ) {}

  async get(key: string): Promise<CachedResponse | null> {
    const entry = await this.inner.get(key);
    if (!entry) return null;
    const { body } = entry.response;
    if (typeof body !== 'string' || !isSealedSecret(body)) return null;
    try {
      const part = JSON.parse(openSecret(this.encryptionKey, body, cacheContext(key))) as SealedPart;
      return {
        ...entry,
        response: { status: entry.response.status, kind: entry.response.kind, headers: part.headers, body: part.body, sourceId: part.sourceId },
      };
    } catch (err) {
      if (err instanceof SecretDecryptionError) return null;
      throw err;
    }
  }

  put(key: string, response: StoredResponse, ttlSeconds: number): Promise<void> {
    const part: SealedPart = { headers: response.headers, body: response.body, sourceId: response.sourceId };
    const sealed: StoredResponse = {
      status: response.status,
      kind: response.kind,
      headers: {},
      sourceId: '',
      body: sealSecret(this.encryptionKey, JSON.stringify(part), cacheContext(key)),
    };
    return this.inner.put(key, sealed, ttlSeconds);
  }

  delete(key: string): Promise<void> {
    return this.inner.delete(key);
  }
}

/**
 * Without SVC_ENCRYPTION_KEY nothing is cached, as prompt logs are refused without it: every
 * lookup is a miss (`x-svc-cache-status: MISS`) and nothing is written.
 */
export class DisabledResponseCache implements ResponseCache {
  async get(): Promise<CachedResponse | null> {
    return null;
  }
  async put(): Promise<void> {}
  async delete(): Promise<void> {}
}

/** What the seal covers: the answer's headers, body and source id; status and kind say nothing. */
interface SealedPart {
  headers: Record<string, string>;
  body: string;
  sourceId: string;
}

const cacheContext = (key: string) => `response-cache:${key}`;
