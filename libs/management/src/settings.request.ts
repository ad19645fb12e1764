/**
 * Bodies of the settings API (spec 1, 6.1). Parsed by hand rather than with class-validator:
 * they nest objects, and a nested field's error must still name it (`prompt_logging.retention_days`).
 * Unknown fields are refused, as on every management body: a typo is not a setting that took.
 */
import { isWebhookEventType, WEBHOOK_EVENT_TYPES } from '@svc/webhooks';
import { DomainError, jsonObjectOf } from '@svc/platform';
import { PROMPT_LOG_RETENTION_DAYS } from '@svc/identity';

export interface SettingsPatch {
  promptLogging?: { enabled?: boolean; retentionDays?: number };
  stepUp?: { enabled?: boolean; email?: string | null };
}

export interface WebhookRequest {
  url: unknown;
  events: string[] | null;
}

const bad = (param: string, message: string) => DomainError.invalid(message, param);

function boolean(value: unknown, param: string): boolean | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'boolean') throw bad(param, `'${param}' must be a boolean.`);
  return value;
}

/** Deliberately plain: the address is proven by the code that reaches it, not by a pattern. */
const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

export function parseSettingsPatch(body: unknown): SettingsPatch {
  const root = jsonObjectOf(body, '', ['prompt_logging', 'step_up']);
  const patch: SettingsPatch = {};
  if (root.prompt_logging !== undefined) {
    const p = jsonObjectOf(root.prompt_logging, 'prompt_logging', ['enabled', 'retention_days']);
    const days = p.retention_days;
    if (
      days !== undefined &&
      (typeof days !== 'number' || !Number.isInteger(days) || days < PROMPT_LOG_RETENTION_DAYS.min || days > PROMPT_LOG_RETENTION_DAYS.max)
    ) {
      throw bad(
        'prompt_logging.retention_days',
        `'prompt_logging.retention_days' must be an integer from ${PROMPT_LOG_RETENTION_DAYS.min} to ${PROMPT_LOG_RETENTION_DAYS.max}.`,
      );
    }
    patch.promptLogging = { enabled: boolean(p.enabled, 'prompt_logging.enabled'), retentionDays: days as number | undefined };
  }
  if (root.step_up !== undefined) {
    const s = jsonObjectOf(root.step_up, 'step_up', ['enabled', 'email']);
    const email = s.email;
    if (email !== undefined && email !== null && (typeof email !== 'string' || email.length > 254 || !EMAIL.test(email))) {
      throw bad('step_up.email', "'step_up.email' must be an email address.");
    }
    patch.stepUp = { enabled: boolean(s.enabled, 'step_up.enabled'), email: email as string | null | undefined };
  }
  if (patch.promptLogging === undefined && patch.stepUp === undefined) throw bad('prompt_logging', 'Send prompt_logging, step_up or both.');
  return patch;
}

/** PUT /v1/settings/webhook: `url` is checked for safety by the service; `events` absent or null means every type. */
export function parseWebhookRequest(body: unknown): WebhookRequest {
  const root = jsonObjectOf(body, '', ['url', 'events']);
  if (typeof root.url !== 'string' || root.url.length === 0 || root.url.length > 2048)
    throw bad('url', "'url' must be an https URL of at most 2048 characters.");
  const events = root.events;
  if (events === undefined || events === null) return { url: root.url, events: null };
  if (!Array.isArray(events) || events.length === 0) throw bad('events', "'events' must be a non-empty array of event types, or null for every type.");
  events.forEach((type, i) => {
    if (!isWebhookEventType(type)) throw bad(`events[${i}]`, `Unknown event type ${JSON.stringify(type)}; known: ${WEBHOOK_EVENT_TYPES.join(', ')}.`);
  });
  return { url: root.url, events: [...new Set(events as string[])] };
}
