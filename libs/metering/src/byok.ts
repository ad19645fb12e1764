import { DomainError } from '@svc/platform';
import type { ProviderError } from '@svc/providers';

/**
 * BYOK needs SVC_ENCRYPTION_KEY to seal and open provider keys. Without it the gateway runs,
 * and BYOK alone is refused: 503, since it is the service's configuration, not the caller's
 * request, that is at fault.
 */
export function byokUnavailable(detail = 'this gateway has no SVC_ENCRYPTION_KEY'): DomainError {
  return DomainError.unavailable(`Bring-your-own-key is not available: ${detail}.`, 'byok_unavailable');
}

/**
 * Spec 7, "(provider)" row: the provider refused the caller's own key (401 or 403 on a BYOK
 * call). The status is the provider's, so a client tells an unauthorised key (401) from a key
 * without access to the model (403); the message says it was the account's provider key, not
 * the gateway key, that was refused.
 */
export function byokKeyRejected(err: ProviderError, provider: string): DomainError {
  const message = `The provider ${provider} rejected the API key saved for this account (HTTP ${err.status}: ${err.upstreamMessage()}). Update or delete it with the operator API.`;
  return err.status === 403 ? DomainError.forbidden(message, 'byok_key_rejected') : DomainError.unauthenticated(message, 'byok_key_rejected');
}
