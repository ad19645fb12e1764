import { Body, Controller, Delete, Get, Headers, HttpCode, Param, Patch, Post, UseGuards } from '@nestjs/common';
import type { EventMetadata } from '@svc/eventstore';
import type { Caller, AccountOrgRow } from '@svc/identity';
import { OrganizationsService, StepUpService } from '@svc/management';
import { bodyValidation } from '@svc/platform';
import { MemberRequest, MemberRoleRequest } from '../admin/admin.request';
import { ActorParam, ApiKeyGuard, CallerParam, Requires } from '../http/auth.guard';
import { OrgRequest } from './account.request';

const presentOrg = (o: AccountOrgRow) => ({ id: o.orgId, name: o.name, owner_account_id: o.ownerAccountId, role: o.role, created_at: o.createdAt });

/**
 * Spec 1, organizations, for their people: the account that created the calling management key
 * acts, with its role in each organization (the operator's twin is under /admin).
 */
@Controller('v1/organizations')
@UseGuards(ApiKeyGuard)
@Requires('management')
export class OrganizationsController {
  constructor(
    private readonly organizations: OrganizationsService,
    private readonly stepUp: StepUpService,
  ) {}

  @Get()
  async list(@CallerParam() caller: Caller) {
    return { data: (await this.organizations.list(caller.createdBy)).map(presentOrg) };
  }

  @Post()
  @HttpCode(201)
  async create(@CallerParam() caller: Caller, @ActorParam() actor: EventMetadata, @Body(bodyValidation({ strict: true })) body: OrgRequest) {
    return { data: presentOrg(await this.organizations.create(caller.createdBy, body.name, actor)) };
  }

  @Delete(':id')
  async delete(
    @CallerParam() caller: Caller,
    @ActorParam() actor: EventMetadata,
    @Param('id') id: string,
    @Headers() headers: Record<string, string | string[] | undefined>,
  ) {
    await this.organizations.delete(caller.createdBy, id, actor, () => this.stepUp.require(caller.createdBy, 'delete_organization', headers, actor));
    return { data: { id, deleted: true } };
  }

  @Get(':id/members')
  async members(@CallerParam() caller: Caller, @Param('id') id: string) {
    const rows = await this.organizations.members(caller.createdBy, id);
    return { data: rows.map((m) => ({ account_id: m.accountId, role: m.role, added_at: m.addedAt })) };
  }

  @Post(':id/members')
  @HttpCode(201)
  async addMember(
    @CallerParam() caller: Caller,
    @ActorParam() actor: EventMetadata,
    @Param('id') id: string,
    @Body(bodyValidation({ strict: true })) body: MemberRequest,
  ) {
    await this.organizations.addMember(caller.createdBy, id, body.account_id, body.role, actor);
    return { data: { org_id: id, account_id: body.account_id, role: body.role } };
  }

  @Patch(':id/members/:account')
  async changeRole(
    @CallerParam() caller: Caller,
    @ActorParam() actor: EventMetadata,
    @Param('id') id: string,
    @Param('account') account: string,
    @Body(bodyValidation({ strict: true })) body: MemberRoleRequest,
  ) {
    await this.organizations.changeRole(caller.createdBy, id, account, body.role, actor);
    return { data: { org_id: id, account_id: account, role: body.role } };
  }

  @Delete(':id/members/:account')
  async removeMember(@CallerParam() caller: Caller, @ActorParam() actor: EventMetadata, @Param('id') id: string, @Param('account') account: string) {
    await this.organizations.removeMember(caller.createdBy, id, account, actor);
    return { data: { org_id: id, account_id: account, removed: true } };
  }
}
