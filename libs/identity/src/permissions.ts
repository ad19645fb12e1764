import type { OrgRole } from './organization';

/** Who acts on a key: the account behind the calling management key, in its workspace. */
export interface KeyManager {
  accountId: string;
  workspaceId: string;
  /** The manager's role in the workspace's organization; null in a personal workspace. */
  orgRole: OrgRole | null;
}

export interface ManagedKey {
  workspaceId: string;
  orgId: string | null;
  createdBy: string;
}

/**
 * Spec 1, organizations: owners and admins manage all the organization's keys, members only
 * the keys they created. In a personal workspace the account manages all its keys.
 */
export function canManageKey(manager: KeyManager, key: ManagedKey): boolean {
  if (manager.workspaceId !== key.workspaceId) return false;
  if (key.orgId === null) return true;
  if (manager.orgRole === 'owner' || manager.orgRole === 'admin') return true;
  return manager.orgRole === 'member' && key.createdBy === manager.accountId;
}

/** What a person of an organization may do there through the account-facing API. */
export type OrgAction = 'view' | 'manage_members' | 'delete';

/**
 * Spec 1: owners and admins manage the organization's people; only the owner, who pays for it,
 * deletes it. Anyone in it sees who else is. A member may always leave (remove itself).
 */
export function orgAllows(role: OrgRole | null, action: OrgAction): boolean {
  if (role === null) return false;
  switch (action) {
    case 'view':
      return true;
    case 'manage_members':
      return role === 'owner' || role === 'admin';
    case 'delete':
      return role === 'owner';
  }
}
