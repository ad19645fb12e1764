import { Controller, Headers, HttpCode, Post, Req, Res, UseGuards } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Caller } from '@svc/identity';
import {
  type AudioFormInput,
  type AudioTask,
  checkTranscriptionModel,
  MAX_AUDIO_BYTES,
  transcriptionBody,
  transcriptionOperation,
  transcriptionRequest,
} from '@svc/interfaces';
import { ApiError, nanoToUsd, nanoToUsdString } from '@svc/platform';
import { ignoredParamsHeader } from '@svc/billing';
import { EdgeResponses } from '../edge/replay';
import { ApiKeyGuard, CallerParam, Requires } from '../http/auth.guard';
import { FILE_FIELD, formParts } from '../http/multipart';
import { Metering } from '@svc/metering';
import { checkAudioFile } from './audio-format';

const OPERATIONS = { transcriptions: transcriptionOperation('transcriptions'), translations: transcriptionOperation('translations') };

/**
 * Spec 4.10: multipart forms, read whole (fields in any order: the openai SDK may send the file
 * first) with the file held in memory up to 25 MB; larger is 413. The answer is the model's, in
 * the format asked for (JSON, or text for text, srt and vtt); the service's id is in
 * `x-svc-generation-id` and the cost (USD) in `x-svc-cost`, and a JSON answer carries them too
 * (`id`, `model`, `usage.cost`, spec 1 rule 2), since a text answer has no body to carry them.
 */
@Controller('v1/audio')
@UseGuards(ApiKeyGuard)
@Requires('model_call')
export class TranscriptionsController {
  constructor(
    private readonly metering: Metering,
    private readonly edge: EdgeResponses,
  ) {}

  @Post('transcriptions')
  @HttpCode(200)
  transcriptions(
    @CallerParam() caller: Caller,
    @Req() request: FastifyRequest,
    @Headers() headers: Record<string, string | string[] | undefined>,
    @Res() reply: FastifyReply,
  ) {
    return this.serve('transcriptions', caller, request, headers, reply);
  }

  @Post('translations')
  @HttpCode(200)
  translations(
    @CallerParam() caller: Caller,
    @Req() request: FastifyRequest,
    @Headers() headers: Record<string, string | string[] | undefined>,
    @Res() reply: FastifyReply,
  ) {
    return this.serve('translations', caller, request, headers, reply);
  }

  private async serve(
    task: AudioTask,
    caller: Caller,
    request: FastifyRequest,
    headers: Record<string, string | string[] | undefined>,
    reply: FastifyReply,
  ): Promise<void> {
    const call = transcriptionRequest(task, await readForm(request));
    checkTranscriptionModel(this.metering.route(caller, 'audio', { model: call.model }).models[0].model);
    await checkAudioFile(call.file.bytes);
    // What makes two requests the same (Idempotency-Key): the fields and the file's digest.
    const fingerprint = { model: call.model, fields: call.fields, file: call.file.bytes.toString('base64') };
    await this.edge.serve(
      { caller, route: `/v1/audio/${task}`, body: fingerprint, headers, cacheable: false },
      reply,
      async ({ clientRequestId, idempotency }) => {
        const { metered, target, answer, charged } = await this.metering.run(caller, OPERATIONS[task], call, {
          model: call.model,
          clientRequestId,
          idempotency,
        });
        const { id } = metered.reservation;
        return {
          generationId: id,
          headers: {
            ...metered.headers,
            ...(call.ignored.length > 0 ? { 'x-svc-ignored-params': ignoredParamsHeader(call.ignored) } : {}),
            'content-type': answer.contentType,
            'x-svc-generation-id': id,
            'x-svc-cost': nanoToUsdString(charged),
          },
          binary: transcriptionBody(answer, call, { id, model: target.model.id, cost: nanoToUsd(charged) }),
        };
      },
    );
  }
}

/** The whole form: text fields by name (repeatable) and the one file, or a 400/413 naming what is wrong. */
async function readForm(request: FastifyRequest): Promise<AudioFormInput> {
  if (!request.isMultipart())
    throw new ApiError(
      415,
      'invalid_request_error',
      'Send the audio as a multipart/form-data form with a file part named file (spec 4.10).',
      'unsupported_media_type',
      'Content-Type',
    );
  const form: AudioFormInput = { fields: {}, file: null };
  for await (const part of formParts(request, { fileSize: MAX_AUDIO_BYTES, fieldSize: 1024 * 1024, parts: 40 })) {
    if (part.type === 'file') {
      if (part.name !== FILE_FIELD) {
        await part.toBuffer().catch(() => undefined);
        throw ApiError.invalidRequest(
          `The form has a file part named ${JSON.stringify(part.name)}; the audio goes in a part named file.`,
          part.name,
          'invalid_file_part',
        );
      }
      if (form.file) {
        await part.toBuffer().catch(() => undefined);
        throw new ApiError(413, 'invalid_request_error', 'The form has more than one file; send one audio file, named file.', 'too_many_files', 'file');
      }
      form.file = { bytes: await part.toBuffer(), filename: part.filename ?? 'audio', contentType: part.mimetype || 'application/octet-stream' };
    } else {
      (form.fields[part.name] ??= []).push(part.value);
    }
  }
  return form;
}
