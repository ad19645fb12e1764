import { Body, Controller, Delete, Get, HttpCode, Param, Patch, Post, Put, Query, Req, UseGuards } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import type { EventMetadata } from '@svc/eventstore';
import { ApiError, bodyValidation, nanoToUsd } from '@svc/platform';
import {
  AddCreditsRequest,
  AdjustmentRequest,
  AdminKeyRequest,
  CreateAccountRequest,
  CreateOrgRequest,
  MemberRequest,
  MemberRoleRequest,
  ProviderKeyRequest,
  UpdateAccountRequest,
} from './admin.request';
import { AdminGuard } from './admin.guard';
import { AdminService, KeysService } from '@svc/management';
import { balanceOf, type CreditsRow } from '@svc/ledger';

const actor = (request: FastifyRequest): EventMetadata => ({ actor: 'admin', ip: request.ip });

function presentCredits(accountId: string, row: CreditsRow) {
  return {
    account_id: accountId,
    total_credits: nanoToUsd(row.purchasedNano),
    total_usage: nanoToUsd(row.usedNano),
    total_adjustments: nanoToUsd(row.adjustedNano),
    balance: nanoToUsd(balanceOf(row)),
    daily_limit_usd: row.dailyLimitNano === null ? null : nanoToUsd(row.dailyLimitNano),
  };
}

/** The operator and companion-app API (docs/api/operator.md). */
@Controller('admin')
@UseGuards(AdminGuard)
export class AdminController {
  constructor(
    private readonly admin: AdminService,
    private readonly keys: KeysService,
  ) {}

  @Post('accounts')
  @HttpCode(201)
  async createAccount(@Req() request: FastifyRequest, @Body(bodyValidation({ strict: true })) body: CreateAccountRequest) {
    return { id: await this.admin.createAccount(body.initial_credits_usd, actor(request)) };
  }

  @Get('accounts/:id')
  async account(@Param('id') id: string) {
    return { data: presentCredits(id, await this.admin.credits(id)) };
  }

  /** The account's daily spend limit (spec 8): `{"daily_limit_usd": n | null}`. */
  @Patch('accounts/:id')
  async updateAccount(@Req() request: FastifyRequest, @Param('id') id: string, @Body(bodyValidation({ strict: true })) body: UpdateAccountRequest) {
    await this.admin.setDailyLimit(id, body.daily_limit_usd, actor(request));
    return { data: presentCredits(id, await this.admin.credits(id)) };
  }

  @Post('accounts/:id/credits')
  @HttpCode(200)
  async addCredits(@Req() request: FastifyRequest, @Param('id') id: string, @Body(bodyValidation({ strict: true })) body: AddCreditsRequest) {
    await this.admin.addCredits(id, body.amount_usd, actor(request));
    return { data: presentCredits(id, await this.admin.credits(id)) };
  }

  /** Issue 23, corrections: a credit note or adjustment, recorded as an event with the operator's name. */
  @Post('accounts/:id/adjustments')
  @HttpCode(201)
  async adjust(@Req() request: FastifyRequest, @Param('id') id: string, @Body(bodyValidation({ strict: true })) body: AdjustmentRequest) {
    const data = await this.admin.adjustBalance(
      id,
      { amountUsd: body.amount_usd, kind: body.kind, reason: body.reason, operator: body.operator, adjustmentId: body.adjustment_id },
      actor(request),
    );
    return { data, balance: presentCredits(id, await this.admin.credits(id)) };
  }

  @Post('accounts/:id/keys')
  @HttpCode(201)
  async createKey(@Req() request: FastifyRequest, @Param('id') id: string, @Body(bodyValidation({ strict: true })) body: AdminKeyRequest) {
    const { org_id, ...settings } = body;
    const { record, secret } = await this.keys.create(await this.admin.keyOwner(id, org_id), settings, actor(request));
    const [data] = await this.keys.present([record]);
    return { data, key: secret };
  }

  /** BYOK (issue 5): the answer carries a hint of the key, never the key. */
  @Put('accounts/:id/provider-keys/:provider')
  async saveProviderKey(
    @Req() request: FastifyRequest,
    @Param('id') id: string,
    @Param('provider') provider: string,
    @Body(bodyValidation({ strict: true })) body: ProviderKeyRequest,
  ) {
    return { data: await this.admin.saveProviderKey(id, provider, body.api_key, actor(request)) };
  }

  @Delete('accounts/:id/provider-keys/:provider')
  async deleteProviderKey(@Req() request: FastifyRequest, @Param('id') id: string, @Param('provider') provider: string) {
    await this.admin.deleteProviderKey(id, provider, actor(request));
    return { data: { provider, deleted: true } };
  }

  @Get('accounts/:id/provider-keys')
  async providerKeys(@Param('id') id: string) {
    return { data: (await this.admin.providerKeys(id)).map((k) => ({ provider: k.provider, hint: k.hint, saved_at: k.savedAt })) };
  }

  @Post('orgs')
  @HttpCode(201)
  async createOrg(@Req() request: FastifyRequest, @Body(bodyValidation({ strict: true })) body: CreateOrgRequest) {
    return { id: await this.admin.createOrg(body.owner_account_id, body.name, actor(request)) };
  }

  @Delete('orgs/:id')
  async deleteOrg(@Req() request: FastifyRequest, @Param('id') id: string) {
    await this.admin.changeOrg(id, { type: 'DeleteOrg' }, actor(request));
    return { data: { id, deleted: true } };
  }

  @Post('orgs/:id/members')
  @HttpCode(201)
  async addMember(@Req() request: FastifyRequest, @Param('id') id: string, @Body(bodyValidation({ strict: true })) body: MemberRequest) {
    await this.admin.changeOrg(id, { type: 'AddMember', accountId: body.account_id, role: body.role }, actor(request));
    return { data: { org_id: id, account_id: body.account_id, role: body.role } };
  }

  @Patch('orgs/:id/members/:account')
  async changeRole(
    @Req() request: FastifyRequest,
    @Param('id') id: string,
    @Param('account') account: string,
    @Body(bodyValidation({ strict: true })) body: MemberRoleRequest,
  ) {
    await this.admin.changeOrg(id, { type: 'ChangeMemberRole', accountId: account, role: body.role }, actor(request));
    return { data: { org_id: id, account_id: account, role: body.role } };
  }

  @Delete('orgs/:id/members/:account')
  async removeMember(@Req() request: FastifyRequest, @Param('id') id: string, @Param('account') account: string) {
    await this.admin.changeOrg(id, { type: 'RemoveMember', accountId: account }, actor(request));
    return { data: { org_id: id, account_id: account, removed: true } };
  }

  @Get('audit-log')
  async auditLog(@Query('account_id') accountId: unknown, @Query('limit') limit: unknown) {
    if (accountId !== undefined && (typeof accountId !== 'string' || accountId === ''))
      throw ApiError.invalidRequest('account_id must be a string.', 'account_id');
    const n = limit === undefined ? 100 : Number(limit);
    if (!Number.isInteger(n) || n < 1 || n > 1000) throw ApiError.invalidRequest('limit must be an integer from 1 to 1000.', 'limit');
    return { data: await this.admin.auditLog((accountId as string | undefined) ?? null, n) };
  }
}
