import { arr, bool, cursorList, dataOf, dateTime, int, nullable, obj, oneOfValues, ref, str } from '../json-schema';
import { json, limitQuery, afterQuery, deleted } from './shared';
import type { OperationDescription } from './types';

const webhookSaved = obj(
  { data: ref('WebhookEndpoint'), secret: str('whsec_...; only when the endpoint is new or its secret rotated') },
  { required: ['data'] },
);
const stepUpActions = ['create_key', 'rotate_key', 'grant_management', 'save_webhook', 'change_step_up', 'save_provider_key', 'delete_organization'];

/** Settings, webhooks, prompt logs, step-up (spec 1, 6.1). */
export const SETTINGS_OPERATIONS: Record<string, OperationDescription> = {
  'GET /v1/settings': { summary: 'Account settings', tag: 'Settings', access: 'management', ok: { schema: dataOf(ref('Settings')) } },
  'PATCH /v1/settings': {
    summary: 'Change prompt logging or step-up',
    tag: 'Settings',
    access: 'management',
    body: json(
      obj(
        {
          prompt_logging: obj({ enabled: bool(), retention_days: int(undefined, { minimum: 1, maximum: 30 }) }, { required: [] }),
          step_up: obj({ enabled: bool(), email: nullable(str()) }, { required: [] }),
        },
        { required: [] },
      ),
    ),
    ok: { schema: dataOf(ref('Settings')) },
    errors: [503],
  },
  'PUT /v1/settings/webhook': {
    summary: 'Save the webhook endpoint',
    tag: 'Settings',
    access: 'management',
    body: json(obj({ url: str('https, public addresses only'), events: nullable(arr(str())) }, { required: ['url'] })),
    ok: { schema: webhookSaved },
  },
  'DELETE /v1/settings/webhook': { summary: 'Remove the webhook endpoint', tag: 'Settings', access: 'management', ok: { schema: deleted() }, errors: [404] },
  'POST /v1/settings/webhook/rotate-secret': {
    summary: 'Rotate the webhook signing secret',
    tag: 'Settings',
    access: 'management',
    ok: { schema: webhookSaved },
    errors: [404],
  },
  'POST /v1/settings/webhook/resume': {
    summary: 'Resume a paused webhook endpoint',
    tag: 'Settings',
    access: 'management',
    ok: { schema: obj({ data: ref('WebhookEndpoint') }) },
    errors: [404],
  },
  'GET /v1/webhook-events': {
    summary: 'Webhook events and their delivery state',
    tag: 'Settings',
    access: 'management',
    query: [limitQuery(100, 20), afterQuery],
    ok: { schema: cursorList(ref('WebhookEvent')) },
  },
  'GET /v1/webhook-events/:id': {
    summary: 'One webhook event with its attempts',
    tag: 'Settings',
    access: 'management',
    ok: { schema: dataOf(ref('WebhookEventWithAttempts')) },
    errors: [404],
  },
  'POST /v1/webhook-events/:id/redeliver': {
    summary: 'Redeliver an event',
    tag: 'Settings',
    access: 'management',
    ok: { status: 202, schema: dataOf(ref('WebhookEventWithAttempts')) },
    errors: [404],
  },
  'GET /v1/prompt-logs': {
    summary: 'Prompt logs',
    tag: 'Settings',
    access: 'management',
    query: [limitQuery(100, 20), afterQuery],
    ok: { schema: cursorList(ref('PromptLogSummary')) },
  },
  'DELETE /v1/prompt-logs': { summary: 'Purge every prompt log', tag: 'Settings', access: 'management', ok: { schema: obj({ deleted: int() }) } },
  'GET /v1/prompt-logs/:generationId': {
    summary: 'One prompt log',
    tag: 'Settings',
    access: 'management',
    ok: {
      schema: dataOf(
        obj({
          generation_id: str(),
          key_id: str(),
          endpoint: str(),
          created_at: dateTime(),
          expires_at: dateTime(),
          request: { description: 'the request as sent' },
          response: { description: 'the answer as sent' },
        }),
      ),
    },
    errors: [404],
  },
  'DELETE /v1/prompt-logs/:generationId': {
    summary: 'Purge one prompt log',
    tag: 'Settings',
    access: 'management',
    ok: { schema: obj({ deleted: int(), generation_id: str() }) },
    errors: [404],
  },
  'POST /v1/step-up/codes': {
    summary: 'Mail a step-up code for one sensitive action',
    tag: 'Settings',
    access: 'management',
    body: json(obj({ action: oneOfValues(stepUpActions) })),
    ok: { schema: dataOf(obj({ action: oneOfValues(stepUpActions), sent_to: str('masked address'), expires_at: dateTime() })) },
  },
};
