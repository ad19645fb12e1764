import { Body, Controller, Headers, HttpCode, Param, Post, Res, UseGuards } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import type { Caller } from '@svc/identity';
import { searchAnswer, searchOperation, searchRequest } from '@svc/interfaces';
import { ApiError, nanoToUsd } from '@svc/platform';
import { EdgeResponses } from '../edge/replay';
import { AdmitWithPrompt, ApiKeyGuard, CallerParam, Requires } from '../http/auth.guard';
import { Metering } from '@svc/metering';

const ROUTE = '/v1/search';

/**
 * Spec 4.14: web search on a catalog engine (a model of type `search`), billed per query
 * through the metering pipeline; Idempotency-Key applies (a billed POST). The engine is the
 * path's (`/v1/search/sim/tavily`), else `search_tool_name`, else the catalog's first search
 * engine the key may use.
 */
@Controller('v1')
@UseGuards(ApiKeyGuard)
@Requires('model_call')
export class SearchController {
  constructor(
    private readonly metering: Metering,
    private readonly edge: EdgeResponses,
  ) {}

  @Post('search')
  @HttpCode(200)
  @AdmitWithPrompt()
  search(
    @CallerParam() caller: Caller,
    @Body() body: unknown,
    @Headers() headers: Record<string, string | string[] | undefined>,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    return this.answer(caller, body, null, headers, reply);
  }

  @Post('search/*')
  @HttpCode(200)
  @AdmitWithPrompt()
  searchOn(
    @CallerParam() caller: Caller,
    @Param('*') engine: string,
    @Body() body: unknown,
    @Headers() headers: Record<string, string | string[] | undefined>,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    return this.answer(caller, body, engine, headers, reply);
  }

  private async answer(
    caller: Caller,
    body: unknown,
    pathEngine: string | null,
    headers: Record<string, string | string[] | undefined>,
    reply: FastifyReply,
  ): Promise<void> {
    // Fastify has already decoded the path (`sim%2Ftavily` is `sim/tavily`): decoding again read
    // `%25` as a malformed escape (a 500) and `%2525` as `%` (issue 41 item 8).
    const call = searchRequest(body, pathEngine);
    const param = pathEngine === null ? 'search_tool_name' : 'engine';
    const engine = call.engine ?? this.metering.defaultModel(caller, 'search');
    await this.edge.serve({ caller, route: ROUTE, body, headers, cacheable: false }, reply, async ({ clientRequestId, idempotency, admission }) => {
      const ran = await this.metering
        .run(caller, searchOperation, call, { model: engine, provider: call.provider, clientRequestId, idempotency, admission })
        .catch((err: unknown) => {
          // The engine is not a field called `model` here: the error names the one the caller set.
          throw ApiError.renamingParam(err, 'model', param);
        });
      const { metered, target, answer, usage, charged } = ran;
      const { id } = metered.reservation;
      return {
        generationId: id,
        headers: { ...metered.headers, 'x-svc-generation-id': id },
        json: searchAnswer(id, target.model.id, call, answer, usage.queries ?? 0, nanoToUsd(charged)),
      };
    });
  }
}
