import { Body, Controller, Delete, Get, Headers, HttpCode, Param, Post, Query, Res, UseGuards } from '@nestjs/common';
import { Responses } from '@svc/billing';
import type { FastifyReply } from 'fastify';
import type { Caller } from '@svc/identity';
import { EdgeResponses } from '../edge/replay';
import { openEventStream, presentBilled } from '../edge/billed-answer';
import { AdmitWithPrompt, ApiKeyGuard, CallerParam, Requires } from '../http/auth.guard';

const ROUTE = '/v1/responses';

/** Spec 4.5: POST /responses, and the stored responses of the caller's workspace. */
@Controller('v1/responses')
@UseGuards(ApiKeyGuard)
export class ResponsesController {
  constructor(
    private readonly responses: Responses,
    private readonly edge: EdgeResponses,
  ) {}

  @Post()
  @HttpCode(200)
  @Requires('model_call')
  @AdmitWithPrompt()
  async create(
    @CallerParam() caller: Caller,
    @Body() body: unknown,
    @Headers() headers: Record<string, string | string[] | undefined>,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    const request = this.responses.readRequest(body);
    await this.edge.serve({ caller, route: ROUTE, body, headers, cacheable: true }, reply, async (tags) =>
      presentBilled(await this.responses.answer(caller, request, tags, openEventStream)),
    );
  }

  @Get(':id')
  @Requires('lookup')
  retrieve(@CallerParam() caller: Caller, @Param('id') id: string) {
    return this.responses.retrieve(caller, id);
  }

  @Delete(':id')
  @HttpCode(200)
  @Requires('model_call')
  delete(@CallerParam() caller: Caller, @Param('id') id: string) {
    return this.responses.delete(caller, id);
  }

  @Get(':id/input_items')
  @Requires('lookup')
  inputItems(@CallerParam() caller: Caller, @Param('id') id: string, @Query() query: Record<string, unknown>) {
    return this.responses.inputItems(caller, id, query);
  }
}
