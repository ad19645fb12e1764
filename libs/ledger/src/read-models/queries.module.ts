import { Inject, Module } from '@nestjs/common';
import { Query, QueryHandler, type IQueryHandler } from '@nestjs/cqrs';
import type { SqlRunner } from '@svc/platform';
import { READ_DB } from '@svc/platform';
import { getActivity, type ActivityFilter, type ActivityRow } from './activity';
import { getCredits, type CreditsRow } from './credits';
import { getWorkspaceGenerations, type GenerationRow } from './generations';

export class GetCreditsQuery extends Query<CreditsRow | null> {
  constructor(readonly accountId: string) {
    super();
  }
}

/** The workspace's generations among `ids` (GET /v1/generation, POST /v1/generations/lookup). */
export class LookupGenerationsQuery extends Query<GenerationRow[]> {
  constructor(
    readonly workspaceId: string,
    readonly ids: readonly string[],
  ) {
    super();
  }
}

export class GetActivityQuery extends Query<ActivityRow[]> {
  constructor(readonly filter: ActivityFilter) {
    super();
  }
}

@QueryHandler(GetCreditsQuery)
export class GetCreditsHandler implements IQueryHandler<GetCreditsQuery> {
  constructor(@Inject(READ_DB) private readonly sql: SqlRunner) {}
  execute(query: GetCreditsQuery) {
    return getCredits(this.sql, query.accountId);
  }
}

@QueryHandler(LookupGenerationsQuery)
export class LookupGenerationsHandler implements IQueryHandler<LookupGenerationsQuery> {
  constructor(@Inject(READ_DB) private readonly sql: SqlRunner) {}
  execute(query: LookupGenerationsQuery) {
    return getWorkspaceGenerations(this.sql, query.workspaceId, query.ids);
  }
}

@QueryHandler(GetActivityQuery)
export class GetActivityHandler implements IQueryHandler<GetActivityQuery> {
  constructor(@Inject(READ_DB) private readonly sql: SqlRunner) {}
  execute(query: GetActivityQuery) {
    return getActivity(this.sql, query.filter);
  }
}

@Module({ providers: [GetCreditsHandler, LookupGenerationsHandler, GetActivityHandler] })
export class LedgerQueriesModule {}
