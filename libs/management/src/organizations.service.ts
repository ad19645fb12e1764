import { Inject, Injectable } from '@nestjs/common';
import type { EventMetadata } from '@svc/eventstore';
import {
  orgAllows,
  type MemberRole,
  type OrgAction,
  getOrg,
  listOrgMembers,
  listOrgsOf,
  orgRoleOf,
  type AccountOrgRow,
  type OrgMemberRow,
} from '@svc/identity';
import { DomainError, READ_DB, type SqlRunner } from '@svc/platform';
import { AdminService } from './admin.service';

/**
 * Organizations as their people manage them with a management key (spec 1): the account behind
 * the key is the person; what it may do follows from its role there.
 */
@Injectable()
export class OrganizationsService {
  constructor(
    @Inject(READ_DB) private readonly sql: SqlRunner,
    private readonly admin: AdminService,
  ) {}

  list(accountId: string): Promise<AccountOrgRow[]> {
    return listOrgsOf(this.sql, accountId);
  }

  /** The account owns what it creates: its balance pays for the organization's keys. */
  async create(accountId: string, name: string | undefined, metadata: EventMetadata): Promise<AccountOrgRow> {
    const orgId = await this.admin.createOrg(accountId, name, metadata);
    const { deleted: _deleted, ...org } = (await getOrg(this.sql, orgId))!;
    return { ...org, role: 'owner' };
  }

  async members(accountId: string, orgId: string): Promise<OrgMemberRow[]> {
    await this.require(accountId, orgId, 'view');
    return listOrgMembers(this.sql, orgId);
  }

  async addMember(accountId: string, orgId: string, member: string, role: MemberRole, metadata: EventMetadata): Promise<void> {
    await this.require(accountId, orgId, 'manage_members');
    await this.admin.changeOrg(orgId, { type: 'AddMember', accountId: member, role }, metadata);
  }

  async changeRole(accountId: string, orgId: string, member: string, role: MemberRole, metadata: EventMetadata): Promise<void> {
    await this.require(accountId, orgId, 'manage_members');
    await this.admin.changeOrg(orgId, { type: 'ChangeMemberRole', accountId: member, role }, metadata);
  }

  /** Anyone may leave; removing someone else takes an owner or admin. */
  async removeMember(accountId: string, orgId: string, member: string, metadata: EventMetadata): Promise<void> {
    await this.require(accountId, orgId, member === accountId ? 'view' : 'manage_members');
    await this.admin.changeOrg(orgId, { type: 'RemoveMember', accountId: member }, metadata);
  }

  /** `authorize` (email step-up) runs once the deletion is allowed, before anything is written. */
  async delete(accountId: string, orgId: string, metadata: EventMetadata, authorize: () => Promise<void>): Promise<void> {
    await this.require(accountId, orgId, 'delete');
    await authorize();
    await this.admin.changeOrg(orgId, { type: 'DeleteOrg' }, metadata);
  }

  /** An organization the account is not part of is as unknown as a missing one. */
  private async require(accountId: string, orgId: string, action: OrgAction): Promise<void> {
    const role = await orgRoleOf(this.sql, orgId, accountId);
    if (role === null) throw DomainError.notFound(`No organization '${orgId}' that this account is part of.`, 'org_not_found', 'id');
    if (!orgAllows(role, action)) {
      const who = action === 'delete' ? 'Only its owner deletes an organization.' : "Only the organization's owner and admins manage its members.";
      throw DomainError.forbidden(`${who} This account is a ${role} of ${orgId}.`, 'org_role_required');
    }
  }
}
