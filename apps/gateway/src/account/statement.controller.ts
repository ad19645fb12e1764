import { Controller, Get, Inject, Query as QueryParam, UseGuards } from '@nestjs/common';
import { EVENT_STORE, type EventStore } from '@svc/eventstore';
import type { Caller } from '@svc/identity';
import { accountStatement, NoSuchAccountError, statementJson, statementSeenFrom } from '@svc/ledger';
import { ApiError, CLOCK, type Clock, READ_DB, type SqlRunner } from '@svc/platform';
import { listKeys } from '@svc/identity';
import { ApiKeyGuard, CallerParam, Requires } from '../http/auth.guard';

/**
 * Issue 23: the account's statement for a period that has ended, replayed from its stream in
 * the event log (not from a read model), so it never changes once built. The account is the one
 * GET /v1/credits reports: an organization key's is its owner's, which its balance is. What it
 * shows is what the caller may see (issue 41 item 13, statementSeenFrom): an organization's key
 * sees its workspace's keys, as on GET /v1/generation.
 */
@Controller('v1')
@UseGuards(ApiKeyGuard)
export class StatementController {
  constructor(
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(CLOCK) private readonly clock: Clock,
    @Inject(READ_DB) private readonly sql: SqlRunner,
  ) {}

  @Get('credits/statement')
  @Requires('management')
  async statement(@CallerParam() caller: Caller, @QueryParam('from') from: unknown, @QueryParam('to') to: unknown) {
    const statement = await accountStatement(this.store, caller.accountId, { from, to }, this.clock.now()).catch((err: unknown) => {
      throw err instanceof NoSuchAccountError ? ApiError.notFound('The account of this key has no ledger yet.', 'account_not_found') : err;
    });
    if (caller.orgId === null) return { data: statementJson(statement) };
    // Revoked keys included: their charges in the period are still the workspace's.
    const visible = new Set((await listKeys(this.sql, caller.workspaceId)).map((k) => k.keyId));
    return { data: statementJson(statementSeenFrom(statement, visible)) };
  }
}
