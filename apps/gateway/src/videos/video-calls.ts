import { Inject, Injectable } from '@nestjs/common';
import type { Caller } from '@svc/identity';
import { isHoldNotOpen, type MeterUsage, type RequestTags, type Reservation, type RoutedModel, type Target } from '@svc/metering';
import { ApiError, CLOCK, type Clock, type Nano, READ_DB, type SqlRunner } from '@svc/platform';
import type { BinaryResult, VideoVariant } from '@svc/providers';
import { callerOfKey } from '@svc/projections';
import { type ClaimedVideo, type VideoRequest, type VideoState, type VideoTarget } from '@svc/videos';
import { Metering } from '../metering/metering.service';

/**
 * A video's hold outlives the longest a video may run (its 60-minute deadline) by a day: a
 * worker fleet that stops for hours still finds it open and bills the clip, or releases it.
 */
const VIDEO_HOLD_TTL_MS = 25 * 3_600_000;

/** Spec 4.15: the endpoint videos are recorded under. */
export const VIDEOS_ENDPOINT = '/v1/videos';

/**
 * Videos through the metered pipeline (spec 1 rule 7, ARCHITECTURE section 10): the estimate
 * held when the video is asked for, and the worker's side of it (the reservation's providers,
 * the clip's price, the charge or the release), in any process.
 */
@Injectable()
export class VideoCalls {
  constructor(
    private readonly metering: Metering,
    @Inject(READ_DB) private readonly sql: SqlRunner,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  /** Holds `seconds` at the dearest provider's price (the estimate shown as `usage.estimated_cost`), under `holdId`. */
  hold(caller: Caller, routed: { models: RoutedModel[]; headers: Record<string, string> }, request: VideoRequest, holdId: string, tags: RequestTags = {}): Promise<Reservation> {
    const plan = { ...routed, promptTokens: 0, worstCase: { seconds: request.seconds }, endpoint: VIDEOS_ENDPOINT, ...tags };
    return this.metering.calls.reserve(caller, plan, { job: { holdId, ttlMs: VIDEO_HOLD_TTL_MS } }).then((metered) => metered.reservation);
  }

  async targets(job: ClaimedVideo): Promise<VideoTarget[]> {
    return (await this.liveTargets(job)).map((target) => {
      const client = target.provider;
      const name = target.route.provider.name;
      const missing = () => ApiError.internal(`provider ${name} makes no videos`);
      return {
        provider: name,
        upstreamModel: target.route.upstreamModel,
        createVideo: (body) => (client.createVideo ? client.createVideo(body) : Promise.reject(missing())),
        getVideo: (id) => (client.getVideo ? client.getVideo(id) : Promise.reject(missing())),
        cancelVideo: (id) => (client.cancelVideo ? client.cancelVideo(id) : Promise.reject(missing())),
        videoContent: (id: string, variant: VideoVariant): Promise<BinaryResult> => (client.videoContent ? client.videoContent(id, variant) : Promise.reject(missing())),
      };
    });
  }

  async costOf(job: ClaimedVideo, provider: string, request: VideoRequest, providerCostNano: Nano | null): Promise<Nano> {
    return this.metering.calls.costOf(await this.target(job, provider), usageOf(request.seconds, providerCostNano));
  }

  /** VideoCompleted's cost, charged once: a hold settled already (by this worker before it died) is not an error. */
  async charge(job: ClaimedVideo, state: VideoState): Promise<void> {
    const { reservation } = job;
    const target = await this.target(job, state.provider!);
    const usage: MeterUsage = { seconds: state.seconds };
    const latencyMs = state.createdAt ? this.clock.now().getTime() - state.createdAt.getTime() : 0;
    const stats = { ...this.metering.calls.statsOf(reservation, target, { usage }), latency_ms: Math.max(0, latencyMs), ttft_ms: null };
    const amountNano = state.costNano ?? 0n;
    // Issue 23: the seconds at the catalog's prices explain the charge when they make it; a clip
    // billed at the router's reported cost (or capped at its hold) keeps no lines, as the cost it
    // reported is not kept beside the charge.
    const { lines, providerCostNano, amountNano: linesTotal } = this.metering.calls.explainCharge(target, usage);
    const explained = linesTotal === amountNano ? { lines, providerCostNano } : {};
    await settled(this.metering.ledger(job.accountId, { type: 'ChargeUsage', holdId: reservation.id, amountNano, stats, usage, returned: 1, ...explained }, reservation.metadata));
  }

  async release(job: ClaimedVideo, errorCode: string): Promise<void> {
    const { reservation } = job;
    await settled(this.metering.ledger(job.accountId, { type: 'ReleaseHold', holdId: reservation.id, errorCode, stats: { endpoint: reservation.endpoint } }, reservation.metadata));
  }

  private async liveTargets(job: ClaimedVideo): Promise<Target[]> {
    const caller = await callerOfKey(this.sql, job.keyId, this.clock.now());
    return this.metering.calls.targetsOf(job.reservation, caller?.sealedProviderKeys ?? new Map());
  }

  private async target(job: ClaimedVideo, provider: string): Promise<Target> {
    const target = (await this.liveTargets(job)).find((t) => t.route.provider.name === provider);
    if (!target) throw ApiError.internal(`video ${job.videoId}: ${provider} is no longer a provider of ${job.reservation.targets[0]?.model}`);
    return target;
  }
}

/** The provider's own figure where it reports one (a router's `usage.cost`), else the seconds at the catalog's price. */
function usageOf(seconds: number, providerCostNano: Nano | null): MeterUsage {
  return providerCostNano === null ? { seconds } : { provider_cost: Number(providerCostNano) };
}

async function settled(decision: Promise<unknown>): Promise<void> {
  try {
    await decision;
  } catch (err) {
    if (isHoldNotOpen(err)) return;
    throw err;
  }
}
