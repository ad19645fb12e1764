import { Controller, Delete, Get, Headers, HttpCode, Inject, Param, Post, Query, Req, Res, UseGuards } from '@nestjs/common';
import { Readable } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { AGGREGATE_STORE, type AggregateStore } from '@svc/eventstore';
import { SqlFileStore } from '@svc/files';
import type { Caller } from '@svc/identity';
import { Metering } from '@svc/metering';
import { ApiError, CLOCK, type Clock, CONFIG, type Config, nanoToUsd, READ_DB, type SqlRunner } from '@svc/platform';
import { PROJECTIONS, type ProjectionRunner } from '@svc/projections';
import { CreateVideo, isVideoId, isVideoTerminal, type VideoRow, VideoCalls, VideoJobs, Videos, VIDEOS_ENDPOINT } from '@svc/videos';
import { EdgeResponses } from '../edge/replay';
import { ApiKeyGuard, CallerParam, Requires } from '../http/auth.guard';
import { formParts } from '../http/multipart';
import { listPage, pageQuery } from '../http/pagination';
import { type SignedContent, VideoContentUrls, type VideoVariant } from './content-urls';

/** The form fields POST /videos reads (spec 4.15; the openai SDK sends its create call as a multipart form). */
const FORM_FIELDS = ['model', 'prompt', 'seconds', 'size', 'aspect_ratio', 'resolution', 'image_url', 'provider', 'user'];

/**
 * Spec 4.15, 3.1 and 2.4: video jobs. POST checks the request against the model, holds the
 * estimate (seconds x price, spec 1 rule 7) and answers `queued` (CreateVideo); the workers do
 * the rest (libs/videos). The clip is served from the gateway's own file store: `url` is a signed
 * URL of it that needs no key (content-urls.ts), and `/content` redirects there. Every route but
 * that file needs a key.
 */
@Controller('v1/videos')
export class VideosController {
  private readonly creating: CreateVideo;
  private readonly videos: Videos;
  private readonly files: SqlFileStore;
  private readonly urls: VideoContentUrls;

  constructor(
    @Inject(CLOCK) private readonly clock: Clock,
    @Inject(CONFIG) config: Config,
    @Inject(READ_DB) sql: SqlRunner,
    @Inject(AGGREGATE_STORE) aggregates: AggregateStore,
    @Inject(PROJECTIONS) projections: ProjectionRunner,
    metering: Metering,
    calls: VideoCalls,
    private readonly edge: EdgeResponses,
  ) {
    const jobs = new VideoJobs(sql, () => config.encryptionKey);
    this.files = new SqlFileStore(sql, () => config.encryptionKey, clock, ['video']);
    this.urls = new VideoContentUrls(config.encryptionKey, clock);
    this.creating = new CreateVideo({
      clock,
      sql,
      aggregates,
      projections,
      routing: metering.routing,
      jobs,
      calls,
      allowPrivateUrls: config.webhookAllowPrivate,
    });
    this.videos = new Videos({ clock, sql, aggregates, projections, jobs, files: this.files });
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
      const created = await this.creating.run(caller, body, tags);
      const { video, holdId } = created;
      return {
        generationId: holdId,
        headers: { ...created.headers, 'x-svc-generation-id': holdId, ...pollHeaders(video, this.clock.now()) },
        json: this.present(caller, video, created.request.prompt, baseUrl(request)),
      };
    });
  }

  /** OpenAI's cursor list: `limit` 1-100 (default 20), `after`, `order` (default desc). */
  @Get()
  @UseGuards(ApiKeyGuard)
  @Requires('lookup')
  async list(@CallerParam() caller: Caller, @Req() request: FastifyRequest, @Query() query: Record<string, unknown>) {
    const page = pageQuery(query.limit, query.after, { max: 100, fallback: 20, isId: isVideoId, what: 'a video id' });
    if (query.order !== undefined && query.order !== 'asc' && query.order !== 'desc') throw ApiError.invalidRequest('order must be asc or desc.', 'order');
    const rows = await this.videos.list(caller, page, (query.order as 'asc' | 'desc' | undefined) ?? 'desc');
    return listPage(
      rows,
      page.limit,
      (row) => row.video.videoId,
      (row) => this.present(caller, row.video, row.prompt, baseUrl(request)),
    );
  }

  /** The video object; while it is not final, `openai-poll-after-ms` and `Retry-After` say when to ask again. */
  @Get(':id')
  @UseGuards(ApiKeyGuard)
  @Requires('lookup')
  async retrieve(@CallerParam() caller: Caller, @Param('id') id: string, @Req() request: FastifyRequest, @Res({ passthrough: true }) reply: FastifyReply) {
    const { video, prompt } = await this.videos.get(caller, id);
    void reply.headers(pollHeaders(video, this.clock.now()));
    return this.present(caller, video, prompt, baseUrl(request));
  }

  /**
   * Spec 4.15 "DELETE deletes" (Videos.remove): a queued or running video is cancelled and
   * answered as the video; an ended one is deleted with its clip, as OpenAI's DELETE answers:
   * `{id, object: "video.deleted", deleted: true}`.
   */
  @Delete(':id')
  @UseGuards(ApiKeyGuard)
  @Requires('model_call')
  async remove(@CallerParam() caller: Caller, @Param('id') id: string, @Req() request: FastifyRequest, @Res({ passthrough: true }) reply: FastifyReply) {
    const removed = await this.videos.remove(caller, id);
    if (removed.deleted) return { id: removed.videoId, object: 'video.deleted' as const, deleted: true };
    void reply.headers(pollHeaders(removed.video, this.clock.now()));
    return this.present(caller, removed.video, removed.prompt, baseUrl(request));
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
    await this.videos.content(content.workspaceId, content.videoId, content.variant);
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
    const file = await this.videos.content(content.workspaceId, content.videoId, content.variant);
    void reply
      .status(200)
      .headers({ 'content-type': contentTypeOf(file.filename), 'content-length': String(file.bytes), 'cache-control': 'private, max-age=3600' })
      .send(Readable.from(this.files.content(content.workspaceId, file.id), { objectMode: false }));
  }

  /** Spec 2.4's video object, its `url` and `thumbnail_url` signed for the caller's workspace. */
  private present(caller: Caller, row: VideoRow, prompt: string | null, base: string) {
    const completed = row.status === 'completed';
    const url = (variant: VideoVariant) => this.urls.sign(base, { workspaceId: caller.workspaceId, videoId: row.videoId, variant });
    return presentVideo(row, prompt, completed ? url('video') : null, completed && row.hasThumbnail ? url('thumbnail') : null);
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
