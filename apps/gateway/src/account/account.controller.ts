import { Body, Controller, Get, HttpCode, Inject, Post, Query as QueryParam, UseGuards } from '@nestjs/common';
import { QueryBus } from '@nestjs/cqrs';
import type { Caller } from '@svc/identity';
import { ApiError, bodyValidation, CLOCK, type Clock, CONFIG, type Config, nanoToUsd, READ_DB, type SqlRunner } from '@svc/platform';
import { ReadYourWrites } from '@svc/projections';
import { GuardrailsService } from '@svc/management';
import { listNotices } from '@svc/webhooks';
import { getKey, listAuditLog } from '@svc/identity';
import { balanceOf, GetActivityQuery, GetCreditsQuery, LookupGenerationsQuery, parseStatementInstant } from '@svc/ledger';
import { ApiKeyGuard, CallerParam, Requires } from '../http/auth.guard';
import { ownAccountOf } from '../http/own-account';
import { limitOf } from '../http/pagination';
import { generationIdOf } from '@svc/billing';
import { CATALOG, type Catalog } from '@svc/catalog';
import { type ChargeContext, presentActivity, presentGeneration } from './account.presenter';
import { activityWindow, GenerationsLookupRequest, parseActivityQuery } from './account.request';

/**
 * Spec 4.20: read from projections, after the account's own writes. Credits, generations and
 * activity only read projections: they may be answered by the standby (ReadYourWrites.readFrom).
 */
@Controller('v1')
@UseGuards(ApiKeyGuard)
@Requires('lookup')
export class AccountController {
  constructor(
    private readonly queries: QueryBus,
    private readonly reads: ReadYourWrites,
    @Inject(CLOCK) private readonly clock: Clock,
    @Inject(READ_DB) private readonly sql: SqlRunner,
    @Inject(CATALOG) catalog: Catalog,
    @Inject(CONFIG) config: Pick<Config, 'byokFeePercent'>,
    private readonly guardrails: GuardrailsService,
  ) {
    this.charges = { catalog, byokFeePercent: config.byokFeePercent };
  }

  private readonly charges: ChargeContext;

  @Get('credits')
  async credits(@CallerParam() caller: Caller) {
    const from = await this.reads.readFrom(caller.accountId, 'credits');
    const row = await this.queries.execute(new GetCreditsQuery(caller.accountId, from));
    if (!row) throw ApiError.notFound('The account of this key has no credit record.', 'account_not_found');
    // Issue 23: credit notes and adjustments are in the balance, as the statement's closing balance has them.
    const balance = balanceOf(row);
    return {
      data: {
        total_credits: nanoToUsd(row.purchasedNano),
        total_usage: nanoToUsd(row.usedNano),
        total_adjustments: nanoToUsd(row.adjustedNano),
        balance: nanoToUsd(balance),
        held: nanoToUsd(row.heldNano),
        open_holds: row.openHolds,
        available: nanoToUsd(balance - row.heldNano),
      },
    };
  }

  @Get('generation')
  async generation(@CallerParam() caller: Caller, @QueryParam('id') id: unknown) {
    if (typeof id !== 'string' || id === '') throw ApiError.invalidRequest("Query parameter 'id' is required.", 'id');
    const from = await this.reads.readFrom(caller.accountId, 'generations');
    // Another workspace's generation is as unknown as a missing one.
    const [g] = await this.queries.execute(new LookupGenerationsQuery(caller.workspaceId, [generationIdOf(id)], from));
    if (!g) throw ApiError.notFound(`No generation with id '${id}'.`, 'generation_not_found', 'id');
    return { data: presentGeneration(g, this.charges) };
  }

  /** Each id in request order (repeats once); another workspace's id reads as not found. */
  @Post('generations/lookup')
  @HttpCode(200)
  async lookup(@CallerParam() caller: Caller, @Body(bodyValidation()) body: GenerationsLookupRequest) {
    const ids = [...new Set(body.ids)];
    const from = await this.reads.readFrom(caller.accountId, 'generations');
    const rows = await this.queries.execute(new LookupGenerationsQuery(caller.workspaceId, ids.map(generationIdOf), from));
    const byId = new Map(rows.map((g) => [g.id, g]));
    return {
      data: ids.map((id) => {
        const g = byId.get(generationIdOf(id));
        return g ? { found: true, ...presentGeneration(g, this.charges) } : { id, found: false };
      }),
    };
  }

  @Get('activity')
  async activity(@CallerParam() caller: Caller, @QueryParam() query: Record<string, unknown>) {
    const window = activityWindow(this.clock.now());
    const filters = parseActivityQuery(query, window);
    const keyId = await this.activityKey(caller, filters.keyId);
    const keyIds = filters.guardrailId === null ? null : await this.guardrailKeys(caller, filters.guardrailId);
    const from = await this.reads.readFrom(caller.accountId, 'activity');
    const rows = await this.queries.execute(
      new GetActivityQuery(
        {
          accountId: caller.accountId,
          workspaceId: caller.workspaceId,
          keyId,
          from: filters.date ?? window.from,
          to: filters.date ?? window.to,
          user: filters.user,
          keyIds,
        },
        from,
      ),
    );
    return { data: rows.map((r) => presentActivity(r, keyId)) };
  }

  /**
   * Issue 15.7: the account reads its own audit log (key, organization, provider-key, credit and
   * daily-limit changes, with who, from where and when), newest first. An organization's
   * members read it through its owner's account: an entry does not record the workspace yet.
   */
  @Get('audit-log')
  @Requires('management')
  async auditLog(
    @CallerParam() caller: Caller,
    @QueryParam('limit') limit: unknown,
    @QueryParam('action') action: unknown,
    @QueryParam('since') since: unknown,
    @QueryParam('until') until: unknown,
  ) {
    const account = ownAccountOf(caller, 'audit log is read');
    const n = limitOf(limit, { max: 1000, fallback: 100 });
    if (action !== undefined && (typeof action !== 'string' || !/^[a-z_]+\.[a-z_]+$/.test(action))) {
      throw ApiError.invalidRequest('action must be an audit action such as key.created.', 'action');
    }
    const range = { since: instant(since, 'since'), until: instant(until, 'until') };
    await this.reads.settle(account, 'audit_log');
    return { data: await listAuditLog(this.sql, account, n, { action: (action as string | undefined) ?? null, ...range }) };
  }

  /** Spec 9: the account's in-app notices (model deprecations), newest first; any key of the account reads them. */
  @Get('notices')
  async notices(@CallerParam() caller: Caller, @QueryParam('limit') limit: unknown) {
    const rows = await listNotices(this.sql, caller.accountId, limitOf(limit, { max: 100, fallback: 20 }));
    return {
      object: 'list',
      data: rows.map((r) => ({
        id: r.id,
        type: r.type,
        title: r.title,
        message: r.message,
        data: r.data,
        created: Math.floor(new Date(r.created).getTime() / 1000),
      })),
    };
  }

  /**
   * Issue 44: the rows of the keys a guardrail applies to now (its keys, its members' keys, every
   * key for the workspace-wide one), by current assignment. Which keys a guardrail covers is
   * management information, as the guardrail itself is.
   */
  private async guardrailKeys(caller: Caller, guardrailId: string): Promise<string[] | null> {
    if (caller.scope !== 'management') throw ApiError.permission('Only a management key can read activity by guardrail.', 'management_key_required');
    return this.guardrails.keysUnder(caller, guardrailId);
  }

  /**
   * Whose activity (spec 4.20): a management key sees its whole workspace, or one key of it
   * (null = all); any other key sees only itself, and asking for another key is forbidden.
   */
  private async activityKey(caller: Caller, requested: string | null): Promise<string | null> {
    if (caller.scope !== 'management') {
      if (requested !== null && requested !== caller.keyId) {
        throw ApiError.permission('Only a management key can read the activity of other keys.', 'management_key_required');
      }
      return caller.keyId;
    }
    if (requested === null) return null;
    const key = await getKey(this.sql, requested);
    // A key of another workspace is as unknown as a missing one (as on GET /v1/keys/{id}).
    if (!key || key.workspaceId !== caller.workspaceId) throw ApiError.notFound(`No key with id '${requested}' in this workspace.`, 'key_not_found', 'key_id');
    return requested;
  }
}

/**
 * An ISO 8601 date or date-time (UTC when it has no offset, like every time argument: issue 41
 * item 16) or unix seconds, of a query filter; null when absent.
 */
function instant(value: unknown, param: string): Date | null {
  if (value === undefined) return null;
  const at =
    typeof value === 'string' && /^\d{1,12}$/.test(value) ? new Date(Number(value) * 1000) : typeof value === 'string' ? parseStatementInstant(value) : null;
  if (at === null || Number.isNaN(at.getTime())) throw ApiError.invalidRequest(`${param} must be an ISO 8601 time or unix seconds.`, param);
  return at;
}
