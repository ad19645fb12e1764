import { Inject, Injectable } from '@nestjs/common';
import type { Caller } from '@svc/identity';
import { type CostLine, decimalOf, isHoldNotOpen, type MeterUsage, type RequestTags, type Reservation, type RoutedModel, type Target } from '@svc/metering';
import { ApiError, CLOCK, type Clock, type Nano, READ_DB, type SqlRunner } from '@svc/platform';
import type { BinaryResult, VideoVariant } from '@svc/providers';
import { callerOfKey } from '@svc/identity';
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
  hold(
    caller: Caller,
    routed: { models: RoutedModel[]; headers: Record<string, string> },
    request: VideoRequest,
    holdId: string,
    tags: RequestTags = {},
  ): Promise<Reservation> {
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
        videoContent: (id: string, variant: VideoVariant): Promise<BinaryResult> =>
          client.videoContent ? client.videoContent(id, variant) : Promise.reject(missing()),
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
    const amountNano = state.costNano ?? 0n;
    const { usage, lines, providerCostNano } = videoCharge(state, amountNano, (u) => this.metering.calls.explainCharge(target, u));
    const latencyMs = state.createdAt ? this.clock.now().getTime() - state.createdAt.getTime() : 0;
    const stats = { ...this.metering.calls.statsOf(reservation, target, { usage }), latency_ms: Math.max(0, latencyMs), ttft_ms: null };
    const explained = lines === null ? {} : { lines, providerCostNano };
    await settled(
      this.metering.ledger(
        job.accountId,
        { type: 'ChargeUsage', holdId: reservation.id, amountNano, stats, usage, returned: 1, ...explained },
        reservation.metadata,
      ),
    );
  }

  async release(job: ClaimedVideo, errorCode: string): Promise<void> {
    const { reservation } = job;
    await settled(
      this.metering.ledger(
        job.accountId,
        { type: 'ReleaseHold', holdId: reservation.id, errorCode, stats: { endpoint: reservation.endpoint } },
        reservation.metadata,
      ),
    );
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

/**
 * Issue 41 item 15: every video charge is explained, its lines adding up to its amount. Its meters
 * are what it was priced at (usageOf): the router's reported cost (`provider_cost`) when there was
 * one, else the seconds. A charge capped at its hold (spec 1 rule 1: never above the estimate
 * shown) ends with a `hold_cap` line taking off what the price came to beyond it. A completion
 * recorded before the reported cost was kept, whose seconds do not make its amount, was priced at
 * the router's figure (or that capped): it is explained as `provider_cost` of its amount.
 * `lines` null only when even that does not add up (a BYOK fee on an old completion).
 */
export function videoCharge(
  state: Pick<VideoState, 'seconds' | 'providerCostNano'>,
  amountNano: Nano,
  explain: (usage: MeterUsage) => { amountNano: Nano; lines: CostLine[]; providerCostNano: Nano | null },
): { usage: MeterUsage; lines: CostLine[] | null; providerCostNano: Nano | null } {
  const usage = usageOf(state.seconds, state.providerCostNano ?? null);
  const priced = explain(usage);
  if (priced.amountNano === amountNano) return { usage, lines: priced.lines, providerCostNano: priced.providerCostNano };
  if (priced.amountNano > amountNano && (state.providerCostNano ?? null) !== null) {
    const over = priced.amountNano - amountNano;
    const cap: CostLine = { meter: 'hold_cap', quantity: 1, unit_price_usd: decimalOf(-over, 9), amount_nano: (-over).toString() };
    return { usage, lines: [...priced.lines, cap], providerCostNano: priced.providerCostNano };
  }
  const reported: MeterUsage = { provider_cost: Number(amountNano) };
  const old = explain(reported);
  return old.amountNano === amountNano
    ? { usage: reported, lines: old.lines, providerCostNano: old.providerCostNano }
    : { usage, lines: null, providerCostNano: priced.providerCostNano };
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
