import { openBytes, openSecret, sealBytes, sealSecret, SecretDecryptionError } from '@svc/platform';

/**
 * Content kept at rest (ARCHITECTURE section 4): sealed with AES-256-GCM under
 * SVC_ENCRYPTION_KEY, each ciphertext bound to the row and column it was written to, so a copy
 * moved elsewhere in the database does not open.
 */
export class SealedContent {
  constructor(
    /** SVC_ENCRYPTION_KEY, read at each use: an operator may set it without a code change. */
    private readonly key: () => Buffer | null,
    /** The error a store answers when it has no key (unavailable: the configuration is at fault, not the request). */
    private readonly unavailable: () => Error,
  ) {}

  /** Whether content can be kept and read at all. */
  get available(): boolean {
    return this.key() !== null;
  }

  /** Throws the store's 503 unless content can be kept and read. */
  requireAvailable(): void {
    this.requireKey();
  }

  seal(plain: string, context: string): string {
    return sealSecret(this.requireKey(), plain, context);
  }

  /** The plain text; null when it was sealed under an earlier key or altered, which is as gone as deleted. */
  open(sealed: string, context: string): string | null {
    return this.opened(() => openSecret(this.requireKey(), sealed, context));
  }

  /** Binary content (file chunks), sealed without the third more that base64 text would take. */
  sealBytes(plain: Buffer, context: string): Buffer {
    return sealBytes(this.requireKey(), plain, context);
  }

  /** The bytes; null, as `open`, when they do not open. */
  openBytes(sealed: Uint8Array, context: string): Buffer | null {
    return this.opened(() => openBytes(this.requireKey(), sealed, context));
  }

  private opened<T>(open: () => T): T | null {
    try {
      return open();
    } catch (err) {
      if (err instanceof SecretDecryptionError) return null;
      throw err;
    }
  }

  private requireKey(): Buffer {
    const key = this.key();
    if (key === null) throw this.unavailable();
    return key;
  }
}
