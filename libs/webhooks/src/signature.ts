import { createHmac, timingSafeEqual } from 'node:crypto';

/** Spec 6.1: the signature header. */
export const SIGNATURE_HEADER = 'svc-signature';

/** Spec 6.1's sample tolerance: receivers reject a timestamp further than this from their clock. */
export const SIGNATURE_TOLERANCE_SECONDS = 300;

/** `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">` (spec 6.1), as Stripe signs. */
export function signWebhook(secret: string, timestampSeconds: number, rawBody: string): string {
  const v1 = createHmac('sha256', secret).update(`${timestampSeconds}.${rawBody}`).digest('hex');
  return `t=${timestampSeconds},v1=${v1}`;
}

/**
 * What a receiver does (and what docs/api/settings-webhooks.md shows): the header parsed, the HMAC compared in
 * constant time against every `v1`, the timestamp within the tolerance of its own clock.
 */
export function verifyWebhookSignature(
  header: string,
  secret: string,
  rawBody: string,
  nowSeconds: number,
  toleranceSeconds = SIGNATURE_TOLERANCE_SECONDS,
): boolean {
  const parts = header.split(',').map((p) => p.trim().split('=', 2) as [string, string | undefined]);
  const t = Number(parts.find(([k]) => k === 't')?.[1]);
  if (!Number.isInteger(t) || Math.abs(nowSeconds - t) > toleranceSeconds) return false;
  const expected = Buffer.from(signWebhook(secret, t, rawBody).split('v1=')[1], 'hex');
  return parts.some(([k, v]) => k === 'v1' && v !== undefined && /^[0-9a-f]{64}$/.test(v) && timingSafeEqual(Buffer.from(v, 'hex'), expected));
}
