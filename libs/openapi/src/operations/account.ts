import { arr, constant, dataOf, int, obj, ref, str } from '../json-schema';
import { json, limitQuery } from './shared';
import type { OperationDescription } from './types';

/** Spec 4.19: keys; spec 4.20: account endpoints. */
export const ACCOUNT_OPERATIONS: Record<string, OperationDescription> = {
  'POST /v1/keys': {
    summary: 'Create a key',
    description: 'Spec 4.19. The secret is returned once, in `key`. Honours Idempotency-Key.',
    tag: 'Keys',
    access: 'management',
    billed: true,
    body: json(ref('KeyRequest')),
    ok: { status: 201, schema: ref('CreatedKey') },
    errors: [409, 422, 503],
  },
  'GET /v1/keys': { summary: "List the workspace's keys", tag: 'Keys', access: 'management', ok: { schema: dataOf(arr(ref('KeyRecord'))) } },
  'GET /v1/keys/:id': { summary: 'Get a key', tag: 'Keys', access: 'management', ok: { schema: dataOf(ref('KeyRecord')) }, errors: [404] },
  'PATCH /v1/keys/:id': {
    summary: 'Update a key',
    description: 'Same fields as create; `null` clears.',
    tag: 'Keys',
    access: 'management',
    body: json(ref('KeyRequest')),
    ok: { schema: dataOf(ref('KeyRecord')) },
    errors: [404],
  },
  'DELETE /v1/keys/:id': {
    summary: 'Revoke a key',
    description: 'Immediate (spec 3.3).',
    tag: 'Keys',
    access: 'management',
    ok: { schema: dataOf(ref('KeyRecord')) },
    errors: [404],
  },
  'POST /v1/keys/:id/rotate': {
    summary: 'Rotate a key',
    description: 'A new secret in `key`; the old one works until the grace period ends.',
    tag: 'Keys',
    access: 'management',
    body: { schema: obj({ grace_period_seconds: int(undefined, { minimum: 0, maximum: 604800, default: 0 }) }, { required: [] }), required: false },
    ok: { schema: ref('CreatedKey') },
    errors: [404],
  },
  // Spec 4.20: account endpoints.
  'GET /v1/key': {
    summary: 'The calling key: limits and spend',
    description: 'Spec 4.20, 2.3.',
    tag: 'Account',
    access: 'any',
    ok: { schema: dataOf(ref('CurrentKey')) },
  },
  'GET /v1/credits': {
    summary: 'Credit balance and lifetime totals',
    description: 'Spec 4.20.',
    tag: 'Account',
    access: 'any',
    ok: { schema: dataOf(ref('Credits')) },
  },
  'GET /v1/credits/statement': {
    summary: "The account's statement for a period that has ended",
    description:
      'Issue 23 (docs/api/account.md, "Statements and corrections"): opening balance, credits, charges per day, model and key with meters, releases, expiries, adjustments, closing balance; replayed from the event log, so it never changes once built. An organization key states its owner\'s account, as GET /v1/credits does.',
    tag: 'Account',
    access: 'management',
    query: [
      { name: 'from', schema: str(), required: true, description: 'inclusive; ISO 8601 date (00:00 UTC) or date-time (UTC when no offset)' },
      { name: 'to', schema: str(), required: true, description: 'exclusive; not in the future; at most 366 days after from' },
    ],
    ok: { schema: dataOf(ref('Statement')) },
    errors: [404],
  },
  'GET /v1/generation': {
    summary: 'Tokens, cost and latency of one request',
    description: 'Spec 4.20.',
    tag: 'Account',
    access: 'any',
    query: [{ name: 'id', schema: str(), required: true, description: 'the response id (`gen-...` or `resp_...`)' }],
    ok: { schema: dataOf(ref('Generation')) },
    errors: [404],
  },
  'POST /v1/generations/lookup': {
    summary: 'Cost and stats of up to 1,000 request ids',
    tag: 'Account',
    access: 'any',
    body: json(obj({ ids: arr(str(), { minItems: 1, maxItems: 1000 }) })),
    ok: {
      schema: dataOf(
        arr({
          anyOf: [ref('GenerationFound'), obj({ id: str(), found: constant(false) })],
        }),
      ),
    },
  },
  'GET /v1/activity': {
    summary: 'Daily usage per model and endpoint, last 30 days',
    tag: 'Account',
    access: 'any',
    query: [
      { name: 'date', schema: str(undefined, { format: 'date' }) },
      { name: 'key_id', schema: str() },
      { name: 'user', schema: str() },
      {
        name: 'guardrail_id',
        schema: str(),
        description: 'management key: the keys the guardrail applies to now (by current assignment, not at the time of each request)',
      },
    ],
    ok: { schema: dataOf(arr(ref('Activity'))) },
    errors: [404],
  },
  'GET /v1/audit-log': {
    summary: "The account's audit log",
    tag: 'Account',
    access: 'management',
    query: [
      limitQuery(1000, 100),
      { name: 'action', schema: str(undefined, { pattern: '^[a-z_]+\\.[a-z_]+$' }) },
      { name: 'since', schema: str() },
      { name: 'until', schema: str() },
    ],
    ok: { schema: dataOf(arr(ref('AuditEntry'))) },
  },
  'GET /v1/notices': {
    summary: 'In-app notices (model deprecations)',
    tag: 'Account',
    access: 'any',
    query: [limitQuery(100, 20)],
    ok: { schema: obj({ object: constant('list'), data: arr(ref('Notice')) }) },
  },
};
