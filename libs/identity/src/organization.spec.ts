import { fold } from '@svc/eventstore';
import { deciderSpec } from '@svc/eventstore/testing/decider-spec';
import { orgDecider, roleOf, type OrgEvent } from './organization';
import { canManageKey, orgAllows } from './permissions';

const spec = deciderSpec(orgDecider);
const ids = { org_id: 'o1', owner_account_id: 'owner' };
const created: OrgEvent = { type: 'OrgCreated', data: { ...ids, name: 'Acme' } };
const adminAdded: OrgEvent = { type: 'MemberAdded', data: { ...ids, account_id: 'ann', role: 'admin' } };
const memberAdded: OrgEvent = { type: 'MemberAdded', data: { ...ids, account_id: 'bob', role: 'member' } };

describe('organization decider', () => {
  it('creates an organization with its owner', () => {
    spec.given([]).when({ type: 'CreateOrg', orgId: 'o1', ownerAccountId: 'owner', name: 'Acme' }).then([created]);
    spec.given([created]).when({ type: 'CreateOrg', orgId: 'o1', ownerAccountId: 'x', name: 'x' }).thenThrows('org_exists');
    // Issue 14.1: organizations.name is NOT NULL; a null name would stop the identity projection.
    spec
      .given([])
      .when({ type: 'CreateOrg', orgId: 'o1', ownerAccountId: 'owner', name: null as unknown as string })
      .thenThrows('invalid_org_name');
    spec
      .given([])
      .when({ type: 'CreateOrg', orgId: 'o1', ownerAccountId: 'owner', name: 'x'.repeat(201) })
      .thenThrows('invalid_org_name');
  });

  it('adds members once, never the owner', () => {
    spec.given([created]).when({ type: 'AddMember', accountId: 'ann', role: 'admin' }).then([adminAdded]);
    spec.given([created, adminAdded]).when({ type: 'AddMember', accountId: 'ann', role: 'member' }).thenThrows('member_exists');
    spec.given([created]).when({ type: 'AddMember', accountId: 'owner', role: 'admin' }).thenThrows('member_is_owner');
    spec.given([]).when({ type: 'AddMember', accountId: 'ann', role: 'admin' }).thenThrows('org_not_found');
  });

  it('changes roles and removes members that exist', () => {
    spec
      .given([created, memberAdded])
      .when({ type: 'ChangeMemberRole', accountId: 'bob', role: 'admin' })
      .then([{ type: 'MemberRoleChanged', data: { ...ids, account_id: 'bob', role: 'admin' } }]);
    spec.given([created, memberAdded]).when({ type: 'ChangeMemberRole', accountId: 'bob', role: 'member' }).then([]);
    spec.given([created]).when({ type: 'ChangeMemberRole', accountId: 'bob', role: 'admin' }).thenThrows('member_not_found');
    spec
      .given([created, memberAdded])
      .when({ type: 'RemoveMember', accountId: 'bob' })
      .then([{ type: 'MemberRemoved', data: { ...ids, account_id: 'bob' } }]);
  });

  it('is deleted once, then refuses every change', () => {
    const deleted: OrgEvent = { type: 'OrgDeleted', data: ids };
    spec.given([created]).when({ type: 'DeleteOrg' }).then([deleted]);
    spec.given([created, deleted]).when({ type: 'DeleteOrg' }).thenThrows('org_deleted');
    spec.given([created, deleted]).when({ type: 'AddMember', accountId: 'x', role: 'member' }).thenThrows('org_deleted');
    expect(roleOf(fold(orgDecider, [created, adminAdded, deleted]), 'ann')).toBeNull();
  });

  it("knows each account's role", () => {
    const state = fold(orgDecider, [created, adminAdded, memberAdded]);
    expect([roleOf(state, 'owner'), roleOf(state, 'ann'), roleOf(state, 'bob'), roleOf(state, 'eve')]).toEqual(['owner', 'admin', 'member', null]);
  });
});

describe('who may manage a key (spec 1, organizations)', () => {
  const adminsKey = { workspaceId: 'o1', orgId: 'o1', createdBy: 'ann' };
  const bobsKey = { workspaceId: 'o1', orgId: 'o1', createdBy: 'bob' };

  it.each([
    ['the owner', 'owner', 'owner', adminsKey, true],
    ['an admin, any key of the organization', 'ann', 'admin', bobsKey, true],
    ['a member, its own key', 'bob', 'member', bobsKey, true],
    ["a member, an admin's key", 'bob', 'member', adminsKey, false],
    ['a former member', 'bob', null, bobsKey, false],
  ] as const)('%s -> %p', (_who, accountId, orgRole, key, allowed) => {
    expect(canManageKey({ accountId, workspaceId: 'o1', orgRole }, key)).toBe(allowed);
  });

  it('keeps workspaces apart, and lets an account manage its personal keys', () => {
    expect(canManageKey({ accountId: 'ann', workspaceId: 'o2', orgRole: 'owner' }, adminsKey)).toBe(false);
    expect(canManageKey({ accountId: 'a1', workspaceId: 'a1', orgRole: null }, { workspaceId: 'a1', orgId: null, createdBy: 'a1' })).toBe(true);
    expect(canManageKey({ accountId: 'a2', workspaceId: 'a2', orgRole: null }, { workspaceId: 'a1', orgId: null, createdBy: 'a1' })).toBe(false);
  });
});

describe('what a person of an organization may do there (spec 1, organizations)', () => {
  it.each([
    ['owner', true, true, true],
    ['admin', true, true, false],
    ['member', true, false, false],
    [null, false, false, false],
  ] as const)('%p: view %p, manage members %p, delete %p', (role, view, manage, remove) => {
    expect([orgAllows(role, 'view'), orgAllows(role, 'manage_members'), orgAllows(role, 'delete')]).toEqual([view, manage, remove]);
  });
});
