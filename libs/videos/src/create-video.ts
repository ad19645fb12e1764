/**
 * POST /videos (spec 4.15) as a use case: the request checked against the model, the estimate
 * held (seconds x price, spec 1 rule 7), the request kept and the video recorded `queued`. The
 * workers do the rest (./runner).
 */
import { randomBytes } from 'node:crypto';
import { defaultModelOf } from '@svc/catalog';
import type { AggregateStore } from '@svc/eventstore';
import type { Caller } from '@svc/identity';
import { newGenerationId, routeOperation, type RequestTags, type Routing } from '@svc/metering';
import { type Clock, DomainError, OutboundRefused, resolveOutboundTarget, type SqlRunner } from '@svc/platform';
import type { ProjectionRunner } from '@svc/projections';
import type { VideoCalls } from './calls';
import { videoStorageUnavailable, type VideoJobs } from './jobs';
import type { VideoRow } from './read-models/videos';
import { validateVideoRequest, type VideoRequest } from './request';
import { videoDecider, videoStream, type VideoCommand } from './video';
import { findVideo } from './videos';
import { REQUEST_GRACE_MS } from './workflow';

export interface CreateVideoDeps {
  clock: Clock;
  /** The read database: the video is answered as its read model shows it. */
  sql: SqlRunner;
  aggregates: Pick<AggregateStore, 'handle'>;
  projections: Pick<ProjectionRunner, 'waitFor'>;
  /** The catalog (the default model is its first video model the key may use), the time, the provider figures. */
  routing: Routing;
  jobs: Pick<VideoJobs, 'available' | 'add' | 'wake'>;
  calls: Pick<VideoCalls, 'hold' | 'release'>;
  /** Development only (as SVC_WEBHOOK_ALLOW_PRIVATE for webhooks): a first frame over http or on a private host let through. */
  allowPrivateUrls: boolean;
}

export interface CreatedVideo {
  /** The video as the read model shows it once recorded. */
  video: VideoRow;
  /** The generation the estimate is held under. */
  holdId: string;
  request: VideoRequest;
  /** What routing says about the model (a retired one's replacement). */
  headers: Record<string, string>;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

export class CreateVideo {
  constructor(private readonly deps: CreateVideoDeps) {}

  /**
   * The request's mistakes first, each naming its field (the body, the model, the fields against
   * the model's capabilities, the first frame's host), then whether prompts can be kept at all:
   * nothing is held for a request that could never run.
   */
  async run(caller: Caller, body: unknown, tags: RequestTags = {}): Promise<CreatedVideo> {
    const { routing, allowPrivateUrls } = this.deps;
    if (!isObject(body)) throw DomainError.invalid('The request body must be a JSON object (or a multipart form).');
    // Spec 4.15 leaves `model` open: without one, the first video model the key may use.
    const model = body.model ?? defaultModelOf(routing.catalog, 'video', caller.allowed_models);
    if (typeof model !== 'string') throw DomainError.invalid('model must be a string: a video model id (GET /v1/models?type=video).', 'model');
    const routed = routeOperation(routing, caller, 'video', { model, provider: body.provider, body });
    const request = validateVideoRequest(body, routed.models[0].model, { allowPrivateUrls });
    await this.checkImageHost(request);
    if (!this.deps.jobs.available) throw videoStorageUnavailable();
    const { video, holdId } = await this.start(caller, routed, request, tags);
    return { video, holdId, request, headers: routed.headers };
  }

  /**
   * Hold, keep, record, then make due: the request is kept before the video is recorded, due only
   * after REQUEST_GRACE_MS, so a worker meeting a request with no stream knows its gateway died
   * (and releases the hold) rather than racing this one. Waiting for the read model comes last:
   * a video recorded runs even when that wait times out (503 projections_behind).
   */
  private async start(
    caller: Caller,
    routed: ReturnType<typeof routeOperation>,
    request: VideoRequest,
    tags: RequestTags,
  ): Promise<{ video: VideoRow; holdId: string }> {
    const { calls, jobs, clock, aggregates, projections } = this.deps;
    const videoId = `video_${randomBytes(12).toString('hex')}`;
    const holdId = newGenerationId();
    const reservation = await calls.hold(caller, routed, request, holdId, tags);
    const now = clock.now();
    const ids = { videoId, accountId: caller.accountId, workspaceId: caller.workspaceId, keyId: caller.keyId };
    try {
      await jobs.add({ ...ids, reservation, request, dueAt: new Date(now.getTime() + REQUEST_GRACE_MS) });
    } catch (err) {
      await calls.release({ ...ids, reservation }, 'video_not_recorded').catch(() => undefined);
      throw err;
    }
    // From here the kept request settles the hold whatever happens: a worker runs the video once
    // it is recorded, or releases the hold after REQUEST_GRACE_MS if it never was.
    const command: VideoCommand = {
      type: 'RequestVideo',
      ...ids,
      model: request.model,
      seconds: request.seconds,
      aspectRatio: request.aspectRatio,
      resolution: request.resolution,
      size: request.size,
      holdId,
      estimatedNano: BigInt(reservation.heldNano),
    };
    const handled = await aggregates.handle(videoDecider, videoStream(videoId), command, { actor: `key:${caller.keyId}`, correlationId: videoId });
    await jobs.wake(videoId, now);
    if (handled.appended) await projections.waitFor(handled.appended.position, ['videos']);
    return { video: await findVideo(this.deps.sql, caller.workspaceId, videoId), holdId };
  }

  /** Spec 4.15 "public https first frame": every address its host has now must be public (the provider fetches it). */
  private async checkImageHost(request: VideoRequest): Promise<void> {
    if (request.imageUrl === null) return;
    try {
      await resolveOutboundTarget(new URL(request.imageUrl), { allowPrivate: this.deps.allowPrivateUrls });
    } catch (err) {
      if (err instanceof OutboundRefused) throw DomainError.invalid(`image_url must be a public https URL of the first frame: ${err.message}.`, 'image_url');
      throw err;
    }
  }
}
