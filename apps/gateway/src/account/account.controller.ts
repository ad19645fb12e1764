import { Controller, Get, Query as QueryParam, UseGuards } from '@nestjs/common';
import { QueryBus } from '@nestjs/cqrs';
import type { Caller } from '../../../../libs/identity/src/authenticate';
import { ApiError } from '../../../../libs/platform/src/errors';
import { nanoToUsd } from '../../../../libs/platform/src/money';
import { GetCreditsQuery, GetGenerationQuery } from '../../../../libs/projections/src/queries.module';
import { ApiKeyGuard, CallerParam, Requires } from '../http/auth.guard';
import { ReadYourWrites } from './read-your-writes';

/** Spec 4.20: read from projections, after this process's own writes for the account. */
@Controller('v1')
@UseGuards(ApiKeyGuard)
@Requires('lookup')
export class AccountController {
  constructor(
    private readonly queries: QueryBus,
    private readonly reads: ReadYourWrites,
  ) {}

  @Get('credits')
  async credits(@CallerParam() caller: Caller) {
    await this.reads.settle(caller.accountId, 'credits');
    const row = await this.queries.execute(new GetCreditsQuery(caller.accountId));
    if (!row) throw ApiError.notFound('The account of this key has no credit record.', 'account_not_found');
    const balance = row.purchasedNano - row.usedNano;
    return {
      data: {
        total_credits: nanoToUsd(row.purchasedNano),
        total_usage: nanoToUsd(row.usedNano),
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
    await this.reads.settle(caller.accountId, 'generations');
    const g = await this.queries.execute(new GetGenerationQuery(id));
    // Another account's generation is as unknown as a missing one.
    if (!g || g.accountId !== caller.accountId) throw ApiError.notFound(`No generation with id '${id}'.`, 'generation_not_found', 'id');
    return {
      data: {
        id: g.id,
        model: g.model,
        provider: g.provider,
        endpoint: g.endpoint,
        status: g.status,
        key_id: g.keyId,
        created_at: g.createdAt.toISOString(),
        finished_at: g.finishedAt?.toISOString() ?? null,
        tokens_prompt: g.promptTokens,
        tokens_completion: g.completionTokens,
        tokens_cached: g.cachedTokens,
        tokens_reasoning: g.reasoningTokens,
        total_cost: nanoToUsd(g.costNano),
        latency_ms: g.latencyMs,
        time_to_first_token_ms: g.ttftMs,
        error_code: g.errorCode,
      },
    };
  }
}
