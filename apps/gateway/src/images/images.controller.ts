import { Body, Controller, Get, Headers, HttpCode, Inject, Param, Post, Req, Res, UseGuards } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { imageStorageUnavailable, StoredImages } from '@svc/conversations';
import type { Caller } from '@svc/identity';
import { checkImageInput, IMAGES_ENDPOINT, imagesAnswer, imagesOperation, imagesRequest, type KeepImages } from '@svc/interfaces';
import { ApiError, CLOCK, type Clock, CONFIG, type Config, nanoToUsd, READ_DB, type SqlRunner } from '@svc/platform';
import { ignoredParamsHeader } from '@svc/billing';
import { EdgeResponses } from '../edge/replay';
import { AdmitWithPrompt, ApiKeyGuard, CallerParam, Requires } from '../http/auth.guard';
import { Metering } from '@svc/metering';

const CONTENT_PATH = '/v1/images/content';

/**
 * Spec 4.8: billed through the metering pipeline; Idempotency-Key applies (a billed POST), the
 * response cache does not (spec 4.2 lists chat interfaces only). Images answered by URL are
 * kept an hour and served without a key: the unguessable id is the secret.
 */
@Controller('v1')
export class ImagesController {
  private readonly stored: StoredImages;

  constructor(
    @Inject(CLOCK) private readonly clock: Clock,
    @Inject(CONFIG) private readonly config: Config,
    @Inject(READ_DB) private readonly sql: SqlRunner,
    private readonly metering: Metering,
    private readonly edge: EdgeResponses,
  ) {
    this.stored = new StoredImages(this.sql, () => this.config.encryptionKey, this.clock);
  }

  @Post('images/generations')
  @HttpCode(200)
  @UseGuards(ApiKeyGuard)
  @Requires('model_call')
  @AdmitWithPrompt()
  async generate(
    @CallerParam() caller: Caller,
    @Body() body: unknown,
    @Headers() headers: Record<string, string | string[] | undefined>,
    @Req() request: FastifyRequest,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    const call = imagesRequest(body);
    // Everything that can refuse the request is settled before anything is held.
    if (call.images.length > 0) checkImageInput(call, this.metering.route(caller, 'image', { model: call.model, provider: call.provider }).models[0].model);
    let keep: KeepImages | undefined;
    if (call.responseFormat === 'url') {
      if (!this.stored.available) throw imageStorageUnavailable();
      const base = publicBaseOf(request);
      keep = async (images) => (await this.stored.save(caller.accountId, images)).map((ref) => `${base}${CONTENT_PATH}/${ref.id}.${ref.extension}`);
    }
    await this.edge.serve({ caller, route: IMAGES_ENDPOINT, body, headers, cacheable: false }, reply, async ({ clientRequestId, idempotency, admission }) => {
      const { metered, target, answer, charged } = await this.metering.run(caller, imagesOperation(keep), call, {
        model: call.model,
        provider: call.provider,
        user: call.user ?? undefined,
        clientRequestId,
        idempotency,
        admission,
      });
      const { id } = metered.reservation;
      return {
        generationId: id,
        headers: {
          ...metered.headers,
          'x-svc-generation-id': id,
          ...(call.ignored.length > 0 ? { 'x-svc-ignored-params': ignoredParamsHeader(call.ignored) } : {}),
        },
        json: imagesAnswer(id, target.model.id, Math.floor(this.clock.now().getTime() / 1000), answer, nanoToUsd(charged)),
      };
    });
  }

  /** The `url` of an image answered by URL; the extension is only for the caller's tools. */
  @Get('images/content/:file')
  async content(@Param('file') file: string, @Res() reply: FastifyReply): Promise<void> {
    const image = await this.stored.find(file.replace(/\.[a-z]{3,4}$/, ''));
    if (!image) throw ApiError.notFound('No such image: it never existed, or its hour is over. Generate it again.', 'image_not_found');
    void reply.status(200).headers({ 'content-type': image.contentType, 'cache-control': 'private, max-age=3600' }).send(image.bytes);
  }
}

/**
 * Where the caller reached this gateway, for the URLs it is given: the request's own Host, and
 * `x-forwarded-proto` when a proxy in front terminated TLS. A Host that cannot be part of a URL
 * is refused before anything is held.
 */
function publicBaseOf(request: FastifyRequest): string {
  const forwarded = request.headers['x-forwarded-proto'];
  const proto = (Array.isArray(forwarded) ? forwarded[0] : forwarded)?.split(',')[0].trim().toLowerCase();
  const protocol = proto === 'http' || proto === 'https' ? proto : request.protocol;
  const host = request.headers.host;
  if (typeof host !== 'string' || !/^([A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(:\d{1,5})?$/.test(host)) {
    throw ApiError.invalidRequest(
      'The Host header is needed to answer with image URLs, and this one is not a host name; ask for response_format "b64_json".',
      'Host',
    );
  }
  return `${protocol}://${host}`;
}
