import { Inject, Module } from '@nestjs/common';
import { Query, QueryHandler, type IQueryHandler } from '@nestjs/cqrs';
import type { SqlRunner } from '../../platform/src/sql';
import { READ_DB } from '../../platform/src/tokens';
import { getCredits, type CreditsRow } from './read-models/credits';
import { getGeneration, type GenerationRow } from './read-models/generations';

export class GetCreditsQuery extends Query<CreditsRow | null> {
  constructor(readonly accountId: string) {
    super();
  }
}

export class GetGenerationQuery extends Query<GenerationRow | null> {
  constructor(readonly id: string) {
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

@QueryHandler(GetGenerationQuery)
export class GetGenerationHandler implements IQueryHandler<GetGenerationQuery> {
  constructor(@Inject(READ_DB) private readonly sql: SqlRunner) {}
  execute(query: GetGenerationQuery) {
    return getGeneration(this.sql, query.id);
  }
}

@Module({ providers: [GetCreditsHandler, GetGenerationHandler] })
export class ProjectionQueriesModule {}
