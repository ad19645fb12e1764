import { arr, dataOf, dateTime, int, obj, ref, str } from '../json-schema';
import { deleted, json } from './shared';
import type { OperationDescription } from './types';

const ids = (field: string) => json(obj({ [field]: arr(str(), { minItems: 1, maxItems: 500 }) }));
const assigned = { schema: obj({ assigned_count: int('newly assigned: those already on it count 0') }) };
const unassigned = { schema: obj({ unassigned_count: int('those that were on it') }) };
const assignment = (field: string) => ({ schema: dataOf(arr(obj({ [field]: str(), guardrail_id: str(), assigned_at: dateTime() }))) });

/**
 * Issue 44: guardrails, shaped like OpenRouter's API. A management key of the workspace's owner
 * or an organization admin (403 `org_role_required` for a member); an id of another workspace is
 * a 404, as a missing one.
 */
export const GUARDRAIL_OPERATIONS: Record<string, OperationDescription> = {
  'GET /v1/guardrails': { summary: "The workspace's guardrails", tag: 'Guardrails', access: 'management', ok: { schema: dataOf(arr(ref('Guardrail'))) } },
  'POST /v1/guardrails': {
    summary: 'Create a guardrail',
    tag: 'Guardrails',
    access: 'management',
    body: json(ref('GuardrailRequest')),
    ok: { status: 201, schema: dataOf(ref('Guardrail')) },
    errors: [409],
  },
  'GET /v1/guardrails/:id': {
    summary: "A guardrail, with each assigned subject's budget in the current window",
    tag: 'Guardrails',
    access: 'management',
    ok: { schema: dataOf(ref('GuardrailWithBudgets')) },
    errors: [404],
  },
  'PATCH /v1/guardrails/:id': {
    summary: 'Change a guardrail (only the fields sent)',
    tag: 'Guardrails',
    access: 'management',
    body: json(ref('GuardrailRequest')),
    ok: { schema: dataOf(ref('Guardrail')) },
    errors: [404],
  },
  'DELETE /v1/guardrails/:id': {
    summary: 'Delete a guardrail and its assignments',
    tag: 'Guardrails',
    access: 'management',
    ok: { schema: deleted({ id: str() }) },
    errors: [404],
  },
  'GET /v1/guardrails/:id/assignments/keys': {
    summary: 'Keys it is assigned to',
    tag: 'Guardrails',
    access: 'management',
    ok: assignment('key_id'),
    errors: [404],
  },
  'POST /v1/guardrails/:id/assignments/keys': {
    summary: 'Assign keys (a key on another guardrail moves to this one)',
    tag: 'Guardrails',
    access: 'management',
    body: ids('key_ids'),
    ok: assigned,
    errors: [404],
  },
  'POST /v1/guardrails/:id/assignments/keys/remove': {
    summary: 'Unassign keys',
    tag: 'Guardrails',
    access: 'management',
    body: ids('key_ids'),
    ok: unassigned,
    errors: [404],
  },
  'GET /v1/guardrails/:id/assignments/members': {
    summary: 'Members it is assigned to (across their keys)',
    tag: 'Guardrails',
    access: 'management',
    ok: assignment('member_id'),
    errors: [404],
  },
  'POST /v1/guardrails/:id/assignments/members': {
    summary: 'Assign members of the organization (a member on another guardrail moves to this one)',
    tag: 'Guardrails',
    access: 'management',
    body: ids('member_ids'),
    ok: assigned,
    errors: [404],
  },
  'POST /v1/guardrails/:id/assignments/members/remove': {
    summary: 'Unassign members',
    tag: 'Guardrails',
    access: 'management',
    body: ids('member_ids'),
    ok: unassigned,
    errors: [404],
  },
  'POST /v1/guardrails/:id/assignments/organization': {
    summary: 'Make it the workspace-wide guardrail (replacing the one there was)',
    tag: 'Guardrails',
    access: 'management',
    ok: { schema: obj({ assigned_count: int('1, or 0 when it already was') }) },
    errors: [404],
  },
  'POST /v1/guardrails/:id/assignments/organization/remove': {
    summary: 'Stop it being the workspace-wide guardrail',
    tag: 'Guardrails',
    access: 'management',
    ok: { schema: obj({ unassigned_count: int('1, or 0 when it was not') }) },
    errors: [404],
  },
};
