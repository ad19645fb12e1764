import { Body, Controller, Headers, HttpCode, Post, Res, UseGuards } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import type { Caller } from '@svc/identity';
import { speechOperation, speechRequest, withVoice } from '@svc/interfaces';
import { nanoToUsdString } from '@svc/platform';
import { EdgeResponses } from '../edge/replay';
import { AdmitWithPrompt, ApiKeyGuard, CallerParam, Requires } from '../http/auth.guard';
import { Metering } from '@svc/metering';

const ROUTE = '/v1/audio/speech';

/**
 * Spec 4.9: binary audio, billed per character through the metering pipeline. The body is the
 * audio itself, so the service's id is in `x-svc-generation-id` and the cost (USD) in
 * `x-svc-cost` (spec 1 rule 2). Idempotency-Key and the response cache (`X-Svc-Cache`) replay
 * the same bytes.
 */
@Controller('v1/audio')
@UseGuards(ApiKeyGuard)
@Requires('model_call')
export class SpeechController {
  constructor(
    private readonly metering: Metering,
    private readonly edge: EdgeResponses,
  ) {}

  @Post('speech')
  @HttpCode(200)
  @AdmitWithPrompt()
  async speech(
    @CallerParam() caller: Caller,
    @Body() body: unknown,
    @Headers() headers: Record<string, string | string[] | undefined>,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    const parsed = speechRequest(body);
    // The voice is checked against the model before anything is held (a 400 bills nothing).
    const call = withVoice(parsed, this.metering.route(caller, 'audio', { model: parsed.model, provider: parsed.provider }).models[0].model);
    await this.edge.serve({ caller, route: ROUTE, body, headers, cacheable: true }, reply, async ({ clientRequestId, idempotency, admission }) => {
      const { metered, answer, charged } = await this.metering.run(caller, speechOperation, call, {
        model: call.model,
        provider: call.provider,
        clientRequestId,
        idempotency,
        admission,
      });
      const { id } = metered.reservation;
      return {
        generationId: id,
        headers: { ...metered.headers, 'content-type': answer.contentType, 'x-svc-generation-id': id, 'x-svc-cost': nanoToUsdString(charged) },
        binary: answer.bytes,
      };
    });
  }
}
