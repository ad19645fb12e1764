/** What a person may do in an organization, and the member form; pure, so the tests can pin them. */
import { ApiFailure } from '../api';
import type { OrgMember, OrgRole } from '../records';

export type MemberRole = Exclude<OrgRole, 'owner'>;

/** docs/api/account.md "Organizations": owners and admins manage the people; only the owner deletes it. */
export const managesMembers = (role: OrgRole): boolean => role === 'owner' || role === 'admin';
export const deletesOrg = (role: OrgRole): boolean => role === 'owner';

/** What the viewer can do to one row of the members table. */
export interface MemberActions {
  /** The role a one-click change gives the member, or null when it cannot be changed. */
  changeTo: MemberRole | null;
  remove: boolean;
  /** The viewer's own row: anyone but the owner may leave. */
  leave: boolean;
}

export function memberActions(viewerRole: OrgRole, viewerAccount: string | null, member: OrgMember): MemberActions {
  const none: MemberActions = { changeTo: null, remove: false, leave: false };
  // The owner is not a member row: it cannot be re-roled, removed, or leave what it pays for.
  if (member.role === 'owner') return none;
  if (member.account_id === viewerAccount) return { ...none, leave: true };
  if (!managesMembers(viewerRole)) return none;
  return { changeTo: member.role === 'admin' ? 'member' : 'admin', remove: true, leave: false };
}

/** The body of POST /v1/organizations/{id}/members, or the problem placed where the API's would be. */
export function memberBody(accountId: string, role: MemberRole): { body: { account_id: string; role: MemberRole } } | { problem: ApiFailure } {
  const account = accountId.trim();
  if (account === '') return { problem: new ApiFailure(400, null, 'account_id', 'Enter the account id of the person to add (it starts with acc_).') };
  return { body: { account_id: account, role } };
}

/** What a role lets a person do, in a sentence. */
export const ROLE_WORDS: Record<OrgRole, string> = {
  owner: 'Owners pay for the organization’s keys, manage its people, and alone can delete it.',
  admin: 'Admins manage its people and every key of it.',
  member: 'Members use it and manage the keys they created.',
};
