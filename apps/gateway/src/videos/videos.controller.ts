import { Controller, Delete, Get, Headers, HttpCode, Inject, Param, Post, Query, Req, Res, UseGuards } from '@nestjs/common';
import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { AGGREGATE_STORE, type AggregateStore } from '@svc/eventstore';
import { SqlFileStore } from '@svc/files';
import type { Caller } from '@svc/identity';
import { newGenerationId, type RequestTags } from '@svc/metering';
import { ApiError, CLOCK, type Clock, CONFIG, type Config, nanoToUsd, OutboundRefused, READ_DB, resolveOutboundTarget, type SqlRunner } from '@svc/platform';
import { PROJECTIONS, type ProjectionRunner } from '@svc/projections';
import {
  getVideo,
  listVideos,
  type VideoRow,
  isVideoTerminal,
  REQUEST_GRACE_MS,
  validateVideoRequest,
  VideoCalls,
  videoDecider,
  VideoJobs,
  VIDEOS_ENDPOINT,
  videoStream,
  type VideoCommand,
  type VideoRequest,
} from '@svc/videos';
import { EdgeResponses } from '../edge/replay';
import { ApiKeyGuard, CallerParam, Requires } from '../http/auth.guard';
import { formParts } from '../http/multipart';
import { listPage, pageQuery } from '../http/pagination';
import { Metering } from '../metering/metering.service';
import { type SignedContent, VideoContentUrls, type VideoVariant } from './content-urls';

const VIDEO_ID = /^video_[0-9a-f]{24}$/;

/** The form fields POST /videos reads (spec 4.15; the openai SDK sends its create call as a multipart form). */
const FORM_FIELDS = ['model', 'prompt', 'seconds', 'size', 'aspect_ratio', 'resolution', 'image_url', 'provider', 'user'];

/**
 * Spec 4.15, 3.1 and 2.4: video jobs. POST checks the request against the model, holds the
 * estimate (seconds x price, spec 1 rule 7) and answers `queued`; the workers do the rest (libs/videos).
 * The clip is served from the gateway's own file store: `url` is a signed URL of it that needs no
 * key (content-urls.ts), and `/content` redirects there. Every route but that file needs a key.
 */
@Controller('v1/videos')
export class VideosController {
  private readonly jobs: VideoJobs;
  private readonly files: SqlFileStore;
  private readonly urls: VideoContentUrls;

  constructor(
    @Inject(CLOCK) private readonly clock: Clock,
    @Inject(CONFIG) private readonly config: Config,
    @Inject(READ_DB) private readonly sql: SqlRunner,
    @Inject(AGGREGATE_STORE) private readonly aggregates: AggregateStore,
    @Inject(PROJECTIONS) private readonly projections: ProjectionRunner,
    private readonly metering: Metering,
    private readonly calls: VideoCalls,
    private readonly edge: EdgeResponses,
  ) {
    this.jobs = new VideoJobs(sql, () => config.encryptionKey);
    this.files = new SqlFileStore(sql, () => config.encryptionKey, clock, ['video']);
    this.urls = new VideoContentUrls(config.encryptionKey, clock);
  }

  @Post()
  @HttpCode(200)
  @UseGuards(ApiKeyGuard)
  @Requires('model_call')
  async create(
    @CallerParam() caller: Caller,
    @Req() request: FastifyRequest,
    @Headers() headers: Record<string, string | string[] | undefined>,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    const body = request.isMultipart() ? await readForm(request) : request.body;
    await this.edge.serve({ caller, route: VIDEOS_ENDPOINT, body, headers, cacheable: false }, reply, async (tags) => {
      if (!isObject(body)) throw ApiError.invalidRequest('The request body must be a JSON object (or a multipart form).');
      // Spec 4.15 leaves `model` open: without one, the first video model the key may use.
      const model = body.model ?? this.metering.defaultModel(caller, 'video');
      if (typeof model !== 'string') throw ApiError.invalidRequest('model must be a string: a video model id (GET /v1/models?type=video).', 'model');
      const routed = this.metering.route(caller, 'video', { model, provider: body.provider, body });
      const video = validateVideoRequest(body, routed.models[0].model, { allowPrivateUrls: this.config.webhookAllowPrivate });
      await this.checkImageHost(video);
      if (!this.jobs.available) throw new ApiError(503, 'service_unavailable', 'Videos need SVC_ENCRYPTION_KEY to keep their prompts.', 'storage_unavailable');
      const row = await this.start(caller, routed, video, tags);
      return {
        generationId: row.holdId,
        headers: { ...routed.headers, 'x-svc-generation-id': row.holdId, ...pollHeaders(row, this.clock.now()) },
        json: this.present(caller, row, video.prompt, baseUrl(request)),
      };
    });
  }

  /** OpenAI's cursor list: `limit` 1-100 (default 20), `after`, `order` (default desc). */
  @Get()
  @UseGuards(ApiKeyGuard)
  @Requires('lookup')
  async list(@CallerParam() caller: Caller, @Req() request: FastifyRequest, @Query() query: Record<string, unknown>) {
    const page = pageQuery(query.limit, query.after, { max: 100, fallback: 20, isId: (id) => VIDEO_ID.test(id), what: 'a video id' });
    if (query.order !== undefined && query.order !== 'asc' && query.order !== 'desc') throw ApiError.invalidRequest('order must be asc or desc.', 'order');
    const rows = await listVideos(this.sql, caller.workspaceId, page.after, page.fetch, (query.order as 'asc' | 'desc' | undefined) ?? 'desc');
    const prompts = await this.jobs.prompts(rows.map((r) => r.videoId));
    return listPage(
      rows,
      page.limit,
      (row) => row.videoId,
      (row) => this.present(caller, row, prompts.get(row.videoId) ?? null, baseUrl(request)),
    );
  }

  /** The video object; while it is not final, `openai-poll-after-ms` and `Retry-After` say when to ask again. */
  @Get(':id')
  @UseGuards(ApiKeyGuard)
  @Requires('lookup')
  async retrieve(@CallerParam() caller: Caller, @Param('id') id: string, @Req() request: FastifyRequest, @Res({ passthrough: true }) reply: FastifyReply) {
    const row = await this.find(caller, id);
    void reply.headers(pollHeaders(row, this.clock.now()));
    return this.present(caller, row, (await this.jobs.request(id))?.prompt ?? null, baseUrl(request));
  }

  /**
   * Spec 4.15 "DELETE deletes". A queued or running video is cancelled (free, see VideoStatus in
   * libs/videos): the answer is the video, `cancelled` once a worker has stopped it at the
   * provider, normally within seconds. An ended video is deleted with its clip, as OpenAI's
   * DELETE answers: `{id, object: "video.deleted", deleted: true}`, and is not found after.
   */
  @Delete(':id')
  @UseGuards(ApiKeyGuard)
  @Requires('model_call')
  async remove(@CallerParam() caller: Caller, @Param('id') id: string, @Req() request: FastifyRequest, @Res({ passthrough: true }) reply: FastifyReply) {
    const row = await this.find(caller, id);
    if (!isVideoTerminal(row.status)) {
      await this.decide({ type: 'RequestCancel', videoId: id }, caller);
      await this.jobs.wake(id, this.clock.now());
      const now = await this.find(caller, id);
      void reply.headers(pollHeaders(now, this.clock.now()));
      return this.present(caller, now, (await this.jobs.request(id))?.prompt ?? null, baseUrl(request));
    }
    const files = await this.jobs.files(id);
    await this.decide({ type: 'DeleteVideo', videoId: id }, caller);
    // Content after the decision: a crash in between leaves files nobody can reach, never a video without its clip.
    for (const fileId of [files.video, files.thumbnail]) if (fileId !== null) await this.files.delete(caller.workspaceId, fileId);
    // Not free for being deleted: a worker still settles a hold the end has not settled yet.
    await this.jobs.forget(id, this.clock.now());
    return { id, object: 'video.deleted' as const, deleted: true };
  }

  /**
   * Spec 4.15 "redirects to the MP4" (and the 4.1 row): 302 to the signed URL of the clip, or
   * with `variant=thumbnail` of its poster. Clients that follow redirects (the openai SDK's
   * downloadContent, curl -L, a browser) get the bytes from there.
   */
  @Get(':id/content')
  @UseGuards(ApiKeyGuard)
  @Requires('lookup')
  async content(
    @CallerParam() caller: Caller,
    @Param('id') id: string,
    @Query('variant') variant: unknown,
    @Req() request: FastifyRequest,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    if (variant !== undefined && variant !== 'video' && variant !== 'thumbnail')
      throw ApiError.invalidRequest('variant must be video or thumbnail.', 'variant');
    const content: SignedContent = { workspaceId: caller.workspaceId, videoId: id, variant: (variant ?? 'video') as VideoVariant };
    await this.servable(content);
    const url = this.urls.sign(baseUrl(request), content);
    if (url === null) throw new ApiError(503, 'service_unavailable', 'Video content URLs need SVC_ENCRYPTION_KEY.', 'storage_unavailable');
    void reply.header('cache-control', 'no-store').redirect(url, 302);
  }

  /**
   * The clip (`video/mp4`) or its poster, streamed from the file store, at a signed URL of
   * `url` / `thumbnail_url` / the `/content` redirect: no key, so `<video src>` works.
   */
  @Get(':id/file')
  async file(@Param('id') id: string, @Query() query: Record<string, unknown>, @Res() reply: FastifyReply): Promise<void> {
    const content = this.urls.verify(id, query);
    const file = await this.servable(content);
    void reply
      .status(200)
      .headers({ 'content-type': contentTypeOf(file.filename), 'content-length': String(file.bytes), 'cache-control': 'private, max-age=3600' })
      .send(Readable.from(this.files.content(content.workspaceId, file.id), { objectMode: false }));
  }

  /** The file a completed video has for `content.variant`, or the 404/409 saying why there is none. */
  private async servable({ workspaceId, videoId: id, variant }: SignedContent) {
    const row = VIDEO_ID.test(id) ? await getVideo(this.sql, workspaceId, id) : null;
    if (!row) throw ApiError.notFound(`No video with id '${id}' exists for this workspace.`, 'video_not_found', 'id');
    if (!isVideoTerminal(row.status))
      throw new ApiError(409, 'invalid_request_error', `Video ${id} is ${row.status}: its content is ready once it has completed.`, 'video_not_ready', 'id');
    if (row.status !== 'completed') throw ApiError.notFound(`Video ${id} is ${row.status}: it has no content.`, 'video_content_not_found', 'id');
    const files = await this.jobs.files(id);
    const fileId = variant === 'thumbnail' ? files.thumbnail : files.video;
    const file = fileId === null ? null : await this.files.get(workspaceId, fileId);
    if (!file) throw ApiError.notFound(`Video ${id} has no ${variant === 'thumbnail' ? 'thumbnail' : 'clip'} to serve.`, 'video_content_not_found', 'variant');
    return file;
  }

  /** Spec 2.4's video object, its `url` and `thumbnail_url` signed for the caller's workspace. */
  private present(caller: Caller, row: VideoRow, prompt: string | null, base: string) {
    const completed = row.status === 'completed';
    const url = (variant: VideoVariant) => this.urls.sign(base, { workspaceId: caller.workspaceId, videoId: row.videoId, variant });
    return presentVideo(row, prompt, completed ? url('video') : null, completed && row.hasThumbnail ? url('thumbnail') : null);
  }

  /**
   * Hold, keep, record, then make due: the request is kept before the video is recorded, due only
   * after REQUEST_GRACE_MS, so a worker meeting a request with no stream knows its gateway died
   * (and releases the hold) rather than racing this one. Waiting for the read model comes last:
   * a video recorded runs even when that wait times out (503 projections_behind).
   */
  private async start(caller: Caller, routed: ReturnType<Metering['route']>, video: VideoRequest, tags: RequestTags): Promise<VideoRow & { holdId: string }> {
    const videoId = `video_${randomBytes(12).toString('hex')}`;
    const holdId = newGenerationId();
    const reservation = await this.calls.hold(caller, routed, video, holdId, tags);
    const now = this.clock.now();
    const ids = { videoId, accountId: caller.accountId, workspaceId: caller.workspaceId, keyId: caller.keyId };
    try {
      await this.jobs.add({ ...ids, reservation, request: video, dueAt: new Date(now.getTime() + REQUEST_GRACE_MS) });
    } catch (err) {
      await this.calls.release({ ...ids, reservation }, 'video_not_recorded').catch(() => undefined);
      throw err;
    }
    // From here the kept request settles the hold whatever happens: a worker runs the video once
    // it is recorded, or releases the hold after REQUEST_GRACE_MS if it never was.
    const command: VideoCommand = {
      type: 'RequestVideo',
      ...ids,
      model: video.model,
      seconds: video.seconds,
      aspectRatio: video.aspectRatio,
      resolution: video.resolution,
      size: video.size,
      holdId,
      estimatedNano: BigInt(reservation.heldNano),
    };
    const handled = await this.aggregates.handle(videoDecider, videoStream(videoId), command, { actor: `key:${caller.keyId}`, correlationId: videoId });
    await this.jobs.wake(videoId, now);
    if (handled.appended) await this.projections.waitFor(handled.appended.position, ['videos']);
    return { ...(await this.find(caller, videoId)), holdId };
  }

  /** Spec 4.15 "public https first frame": every address its host has now must be public (the provider fetches it). */
  private async checkImageHost(video: VideoRequest): Promise<void> {
    if (video.imageUrl === null) return;
    try {
      await resolveOutboundTarget(new URL(video.imageUrl), { allowPrivate: this.config.webhookAllowPrivate });
    } catch (err) {
      if (err instanceof OutboundRefused)
        throw ApiError.invalidRequest(`image_url must be a public https URL of the first frame: ${err.message}.`, 'image_url');
      throw err;
    }
  }

  /** Decides on the video's stream and waits until the videos read model shows it (read your writes). */
  private async decide(command: VideoCommand, caller: Caller): Promise<void> {
    const handled = await this.aggregates.handle(videoDecider, videoStream(command.videoId), command, {
      actor: `key:${caller.keyId}`,
      correlationId: command.videoId,
    });
    if (handled.appended) await this.projections.waitFor(handled.appended.position, ['videos']);
  }

  private async find(caller: Caller, id: string): Promise<VideoRow> {
    const row = VIDEO_ID.test(id) ? await getVideo(this.sql, caller.workspaceId, id) : null;
    if (!row) throw ApiError.notFound(`No video with id '${id}' exists for this workspace.`, 'video_not_found', 'id');
    return row;
  }
}

/** The text fields of a multipart create; a file (OpenAI's `input_reference` upload) is refused by name. */
async function readForm(request: FastifyRequest): Promise<Record<string, unknown>> {
  const fields: Record<string, unknown> = {};
  for await (const part of formParts(request, { fileSize: 1, fieldSize: 256 * 1024, parts: FORM_FIELDS.length + 1 })) {
    if (part.type === 'file') {
      part.file.resume();
      throw ApiError.invalidRequest('A first frame is not uploaded here: give it as image_url (a public https URL).', part.name);
    }
    if (!FORM_FIELDS.includes(part.name))
      throw ApiError.invalidRequest(`Unknown field ${JSON.stringify(part.name)}: a video takes ${FORM_FIELDS.join(', ')}.`, part.name, 'unknown_parameter');
    fields[part.name] = part.value;
  }
  return fields;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

const unix = (at: Date | null) => (at === null ? null : Math.floor(at.getTime() / 1000));

function baseUrl(request: FastifyRequest): string {
  return `${request.protocol}://${request.host}`;
}

function contentTypeOf(filename: string): string {
  if (filename.endsWith('.mp4')) return 'video/mp4';
  if (filename.endsWith('.webp')) return 'image/webp';
  if (filename.endsWith('.png')) return 'image/png';
  return 'image/jpeg';
}

/** While a video is not final: when the worker next looks at it, at least a second away (WIRE-FORMATS 2: `openai-poll-after-ms`). */
function pollHeaders(row: VideoRow, now: Date): Record<string, string> {
  if (isVideoTerminal(row.status)) return {};
  const ms = Math.max(1_000, (row.nextPollAt?.getTime() ?? now.getTime()) - now.getTime());
  return { 'openai-poll-after-ms': String(ms), 'retry-after': String(Math.ceil(ms / 1000)) };
}

/** Spec 2.4's video object, with OpenAI's `size` and `expires_at` (its SDK reads them). */
function presentVideo(row: VideoRow, prompt: string | null, url: string | null, thumbnailUrl: string | null) {
  return {
    id: row.videoId,
    object: 'video' as const,
    model: row.model,
    status: row.status,
    progress: row.progress,
    created_at: unix(row.createdAt),
    completed_at: unix(row.completedAt),
    expires_at: null,
    prompt,
    seconds: String(row.seconds),
    size: row.size,
    aspect_ratio: row.aspectRatio,
    resolution: row.resolution,
    error: row.error,
    url,
    thumbnail_url: thumbnailUrl,
    usage: { cost: row.costNano === null ? 0 : nanoToUsd(row.costNano), estimated_cost: nanoToUsd(row.estimatedNano) },
    remixed_from_video_id: null,
  };
}
