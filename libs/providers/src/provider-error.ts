/**
 * - `http`: the upstream answered with an error status (or an error event inside a stream);
 * - `timeout`: no answer, or no stream data, within the adapter's timeout (status 504);
 * - `network`: refused, reset or cut connection, including a stream that ended without its
 *   terminator (status 502);
 * - `invalid_response`: a success status with a body that is not the expected JSON, or a redirect
 *   (3xx), which is never followed: it would take the key and the prompt elsewhere (status 502).
 */
export type ProviderErrorKind = 'timeout' | 'network' | 'http' | 'invalid_response';

export interface ProviderErrorInit {
  kind: ProviderErrorKind;
  status: number;
  message: string;
  upstreamBody?: unknown;
  cause?: unknown;
}

export class ProviderError extends Error {
  override readonly name = 'ProviderError';
  readonly kind: ProviderErrorKind;
  /** The upstream's HTTP status; 504 for a timeout, 502 for the other failures without one. */
  readonly status: number;
  /** Whether another attempt (or a fallback model) may succeed: 408, 429 and every 5xx. */
  readonly retryable: boolean;
  /** The parsed error body (raw text when it was not JSON), for logs and BYOK rejection codes. */
  readonly upstreamBody?: unknown;

  constructor(init: ProviderErrorInit) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.kind = init.kind;
    this.status = init.status;
    this.retryable = init.status === 408 || init.status === 429 || init.status >= 500;
    if (init.upstreamBody !== undefined) this.upstreamBody = init.upstreamBody;
  }

  /** The upstream's own explanation when its error body has one (OpenAI's shape), else ours. */
  upstreamMessage(): string {
    const body = this.upstreamBody as { error?: { message?: unknown } } | undefined;
    return typeof body?.error?.message === 'string' ? body.error.message : this.message;
  }
}
