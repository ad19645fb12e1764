import { DomainError, type Decider, type DomainEvent } from '@svc/eventstore';
import { isStorableText } from '@svc/platform';

/** The organization aggregate (stream `org-<id>`): members and roles (spec 1, organizations). */
export const orgStream = (orgId: string) => `org-${orgId}`;

/** The owner is the account billed for every key of the organization; it is not a member row. */
export type MemberRole = 'admin' | 'member';
export type OrgRole = 'owner' | MemberRole;

export type OrgEvent =
  | DomainEvent<'OrgCreated', { org_id: string; owner_account_id: string; name: string }>
  | DomainEvent<'MemberAdded', { org_id: string; owner_account_id: string; account_id: string; role: MemberRole }>
  | DomainEvent<'MemberRoleChanged', { org_id: string; owner_account_id: string; account_id: string; role: MemberRole }>
  | DomainEvent<'MemberRemoved', { org_id: string; owner_account_id: string; account_id: string }>
  | DomainEvent<'OrgDeleted', { org_id: string; owner_account_id: string }>;

export type OrgCommand =
  | { type: 'CreateOrg'; orgId: string; ownerAccountId: string; name: string }
  | { type: 'AddMember'; accountId: string; role: MemberRole }
  | { type: 'ChangeMemberRole'; accountId: string; role: MemberRole }
  | { type: 'RemoveMember'; accountId: string }
  | { type: 'DeleteOrg' };

export interface OrgState {
  orgId: string | null;
  owner: string | null;
  members: Readonly<Record<string, MemberRole>>;
  deleted: boolean;
}

export function roleOf(state: OrgState, accountId: string): OrgRole | null {
  if (state.deleted) return null;
  if (accountId === state.owner) return 'owner';
  return state.members[accountId] ?? null;
}

function requireActive(state: OrgState): { org_id: string; owner_account_id: string } {
  if (state.orgId === null || state.owner === null) throw new DomainError('org_not_found', 'The organization does not exist.');
  if (state.deleted) throw new DomainError('org_deleted', 'The organization was deleted.');
  return { org_id: state.orgId, owner_account_id: state.owner };
}

function requireMember(state: OrgState, accountId: string): void {
  if (!(accountId in state.members)) throw new DomainError('member_not_found', `Account ${accountId} is not a member of the organization.`);
}

export const orgDecider: Decider<OrgCommand, OrgState, OrgEvent> = {
  initialState: () => ({ orgId: null, owner: null, members: {}, deleted: false }),

  decide(command, state) {
    if (command.type === 'CreateOrg') {
      if (state.orgId !== null) throw new DomainError('org_exists', 'The organization already exists.');
      // organizations.name is NOT NULL text: anything else would stop the identity projection.
      if (typeof command.name !== 'string' || command.name.length > 200 || !isStorableText(command.name)) {
        throw new DomainError('invalid_org_name', 'An organization name is a string of at most 200 characters.', { param: 'name' });
      }
      return [{ type: 'OrgCreated', data: { org_id: command.orgId, owner_account_id: command.ownerAccountId, name: command.name } }];
    }
    const ids = requireActive(state);
    switch (command.type) {
      case 'AddMember':
        if (command.accountId === state.owner) throw new DomainError('member_is_owner', 'The owner is already part of the organization.');
        if (command.accountId in state.members) throw new DomainError('member_exists', `Account ${command.accountId} is already a member.`);
        return [{ type: 'MemberAdded', data: { ...ids, account_id: command.accountId, role: command.role } }];
      case 'ChangeMemberRole':
        requireMember(state, command.accountId);
        if (state.members[command.accountId] === command.role) return [];
        return [{ type: 'MemberRoleChanged', data: { ...ids, account_id: command.accountId, role: command.role } }];
      case 'RemoveMember':
        requireMember(state, command.accountId);
        return [{ type: 'MemberRemoved', data: { ...ids, account_id: command.accountId } }];
      case 'DeleteOrg':
        return [{ type: 'OrgDeleted', data: ids }];
    }
  },

  evolve(state, event) {
    switch (event.type) {
      case 'OrgCreated':
        return { orgId: event.data.org_id, owner: event.data.owner_account_id, members: {}, deleted: false };
      case 'MemberAdded':
      case 'MemberRoleChanged':
        return { ...state, members: { ...state.members, [event.data.account_id]: event.data.role } };
      case 'MemberRemoved': {
        const { [event.data.account_id]: _removed, ...members } = state.members;
        return { ...state, members };
      }
      case 'OrgDeleted':
        return { ...state, deleted: true };
      default:
        return state;
    }
  },
};
