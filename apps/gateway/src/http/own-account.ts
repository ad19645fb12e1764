import type { Caller } from '@svc/identity';
import { ApiError } from '@svc/platform';

/**
 * What belongs to the account that pays (its audit log, its settings) is managed with a
 * management key of that account itself; an organization's, with one of its owner's own account.
 * `what` names it in the 403, e.g. "audit log is read".
 */
export function ownAccountOf(caller: Caller, what: string): string {
  if (caller.workspaceId !== caller.accountId) {
    throw ApiError.permission(`An organization's ${what} with a management key of its owner's own account.`, 'management_key_required');
  }
  return caller.accountId;
}
