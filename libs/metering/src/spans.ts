/**
 * Issue 22: what the spans of a billed call say of it: ids, the provider and model, the
 * endpoint, which try an upstream call is; never content or a secret.
 */
import { ATTR, type Attributes } from '@svc/telemetry';
import { providerName } from './charges';
import type { Reservation } from './reservation';
import type { PricedTarget, Target } from './targets';

/** Who a span's decision is about: ids only (issue 22: never content or a secret). */
export function ids(generationId: string, accountId: string, keyId: string): Attributes {
  return { [ATTR.generationId]: generationId, [ATTR.accountId]: accountId, [ATTR.keyId]: keyId };
}

export function settleAttributes(reservation: Reservation, target: PricedTarget): Attributes {
  return {
    ...ids(reservation.id, reservation.accountId, reservation.keyId),
    [ATTR.provider]: providerName(target),
    [ATTR.model]: target.model.id,
    [ATTR.endpoint]: reservation.endpoint,
  };
}

/** An upstream call's span: which provider serves which model for what, and which try this is (fallbacks make several). */
export function upstreamAttributes(generationId: string, target: Target, attempt: number): Attributes {
  return {
    [ATTR.generationId]: generationId,
    [ATTR.provider]: providerName(target),
    [ATTR.model]: target.model.id,
    [ATTR.operation]: target.model.type,
    [ATTR.attempt]: attempt,
  };
}
