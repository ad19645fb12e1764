import { arr, bool, dataOf, obj, ref, str } from '../json-schema';
import { json, deleted, memberBody, roleBody } from './shared';
import type { OperationDescription } from './types';

/** Bring your own key, organizations (spec 1). */
export const ORGANIZATION_OPERATIONS: Record<string, OperationDescription> = {
  'GET /v1/provider-keys': {
    summary: "The account's own provider keys",
    tag: 'Account',
    access: 'management',
    ok: { schema: obj({ data: arr(ref('ProviderKey')), providers: arr(str()) }) },
  },
  'PUT /v1/provider-keys/:provider': {
    summary: 'Save a provider key',
    tag: 'Account',
    access: 'management',
    body: json(obj({ api_key: str() })),
    ok: { schema: dataOf(obj({ provider: str(), hint: str() })) },
    errors: [404, 503],
  },
  'DELETE /v1/provider-keys/:provider': {
    summary: 'Delete a provider key',
    tag: 'Account',
    access: 'management',
    ok: { schema: dataOf(deleted({ provider: str() })) },
    errors: [404],
  },
  'GET /v1/organizations': {
    summary: 'Organizations the account owns or belongs to',
    tag: 'Organizations',
    access: 'management',
    ok: { schema: dataOf(arr(ref('Organization'))) },
  },
  'POST /v1/organizations': {
    summary: 'Create an organization',
    tag: 'Organizations',
    access: 'management',
    body: json(obj({ name: str() }, { required: [] })),
    ok: { status: 201, schema: dataOf(ref('Organization')) },
  },
  'DELETE /v1/organizations/:id': {
    summary: 'Delete an organization (owner only)',
    tag: 'Organizations',
    access: 'management',
    ok: { schema: dataOf(deleted({ id: str() })) },
    errors: [404],
  },
  'GET /v1/organizations/:id/members': {
    summary: 'Members, owner first',
    tag: 'Organizations',
    access: 'management',
    ok: { schema: dataOf(arr(ref('Member'))) },
    errors: [404],
  },
  'POST /v1/organizations/:id/members': {
    summary: 'Add a member',
    tag: 'Organizations',
    access: 'management',
    body: json(memberBody),
    ok: { status: 201, schema: dataOf(ref('MemberChange')) },
    errors: [404],
  },
  'PATCH /v1/organizations/:id/members/:account': {
    summary: "Change a member's role",
    tag: 'Organizations',
    access: 'management',
    body: json(roleBody),
    ok: { schema: dataOf(ref('MemberChange')) },
    errors: [404],
  },
  'DELETE /v1/organizations/:id/members/:account': {
    summary: 'Remove a member (or leave)',
    tag: 'Organizations',
    access: 'management',
    ok: { schema: dataOf(obj({ org_id: str(), account_id: str(), removed: bool() })) },
    errors: [404],
  },
};
