import { Inject, Logger, Module } from '@nestjs/common';
import { Query, QueryHandler, type IQueryHandler } from '@nestjs/cqrs';
import type { SqlExecutor, SqlRunner } from '@svc/platform';
import { READ_DB, REPLICA_DB } from '@svc/platform';
import type { ReadSource } from '@svc/projections';
import { getActivity, type ActivityFilter, type ActivityRow } from './activity';
import { getCredits, type CreditsRow } from './credits';
import { getWorkspaceGenerations, type GenerationRow } from './generations';

/**
 * These queries only read projections: each may be answered by the standby (DATABASE_READ_URL)
 * when the caller says so (`from`, as ReadYourWrites.readFrom decided); the primary otherwise.
 */
export class GetCreditsQuery extends Query<CreditsRow | null> {
  constructor(
    readonly accountId: string,
    readonly from: ReadSource = 'primary',
  ) {
    super();
  }
}

/** The workspace's generations among `ids` (GET /v1/generation, POST /v1/generations/lookup). */
export class LookupGenerationsQuery extends Query<GenerationRow[]> {
  constructor(
    readonly workspaceId: string,
    readonly ids: readonly string[],
    readonly from: ReadSource = 'primary',
  ) {
    super();
  }
}

export class GetActivityQuery extends Query<ActivityRow[]> {
  constructor(
    readonly filter: ActivityFilter,
    readonly from: ReadSource = 'primary',
  ) {
    super();
  }
}

/** Both databases of the read models; a read the standby fails (gone, or cancelled by a replay conflict) is asked of the primary. */
abstract class ReadModelHandler {
  private readonly logger = new Logger('read-models');

  constructor(
    private readonly primary: SqlRunner,
    private readonly replica: SqlRunner,
  ) {}

  protected async read<T>(from: ReadSource, query: (sql: SqlExecutor) => Promise<T>): Promise<T> {
    if (from === 'primary' || this.replica === this.primary) return query(this.primary);
    try {
      return await query(this.replica);
    } catch (err) {
      this.logger.warn(`the standby failed a read (${err instanceof Error ? err.message : String(err)}); reading from the primary`);
      return query(this.primary);
    }
  }
}

@QueryHandler(GetCreditsQuery)
export class GetCreditsHandler extends ReadModelHandler implements IQueryHandler<GetCreditsQuery> {
  constructor(@Inject(READ_DB) primary: SqlRunner, @Inject(REPLICA_DB) replica: SqlRunner) {
    super(primary, replica);
  }
  execute(query: GetCreditsQuery) {
    return this.read(query.from, (sql) => getCredits(sql, query.accountId));
  }
}

@QueryHandler(LookupGenerationsQuery)
export class LookupGenerationsHandler extends ReadModelHandler implements IQueryHandler<LookupGenerationsQuery> {
  constructor(@Inject(READ_DB) primary: SqlRunner, @Inject(REPLICA_DB) replica: SqlRunner) {
    super(primary, replica);
  }
  execute(query: LookupGenerationsQuery) {
    return this.read(query.from, (sql) => getWorkspaceGenerations(sql, query.workspaceId, query.ids));
  }
}

@QueryHandler(GetActivityQuery)
export class GetActivityHandler extends ReadModelHandler implements IQueryHandler<GetActivityQuery> {
  constructor(@Inject(READ_DB) primary: SqlRunner, @Inject(REPLICA_DB) replica: SqlRunner) {
    super(primary, replica);
  }
  execute(query: GetActivityQuery) {
    return this.read(query.from, (sql) => getActivity(sql, query.filter));
  }
}

@Module({ providers: [GetCreditsHandler, LookupGenerationsHandler, GetActivityHandler] })
export class LedgerQueriesModule {}
