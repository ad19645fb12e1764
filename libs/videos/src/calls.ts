import type { Caller } from '@svc/identity';
import {
  type AnsweredBy,
  type CostLine,
  decimalOf,
  type MeteredCalls,
  type MeterUsage,
  type RequestTags,
  type Reservation,
  type RoutedModel,
} from '@svc/metering';
import type { Clock, Nano } from '@svc/platform';
import { type BinaryResult, operationOf, type VideoVariant } from '@svc/providers';
import type { ClaimedVideo } from './jobs';
import type { VideoRequest } from './request';
import type { VideoTarget } from './runner';
import type { VideoState } from './video';

/**
 * A video's hold outlives the longest a video may run (its 60-minute deadline) by a day: a
 * worker fleet that stops for hours still finds it open and bills the clip, or releases it.
 */
const VIDEO_HOLD_TTL_MS = 25 * 3_600_000;

/** Spec 4.15: the endpoint videos are recorded under. */
export const VIDEOS_ENDPOINT = '/v1/videos';

export interface VideoCallsDeps {
  calls: MeteredCalls;
  clock: Clock;
  /** The account's own provider keys (sealed) as the video's key reads them now: none once the key is gone. */
  sealedProviderKeys(keyId: string): Promise<ReadonlyMap<string, string>>;
}

/**
 * Videos through the metered pipeline (spec 1 rule 7, ARCHITECTURE section 10): the estimate
 * held when the video is asked for, and the worker's side of it (the reservation's providers,
 * the clip's price, the charge or the release), in any process. The charge and the release
 * need only the reservation: the clip may end a day after it was asked for.
 */
export class VideoCalls {
  constructor(private readonly deps: VideoCallsDeps) {}

  /** Holds `seconds` at the dearest provider's price (the estimate shown as `usage.estimated_cost`), under `holdId`. */
  async hold(
    caller: Caller,
    routed: { models: RoutedModel[]; headers: Record<string, string> },
    request: VideoRequest,
    holdId: string,
    tags: RequestTags = {},
  ): Promise<Reservation> {
    const plan = { ...routed, promptTokens: 0, worstCase: { seconds: request.seconds }, endpoint: VIDEOS_ENDPOINT, ...tags };
    return (await this.deps.calls.reserve(caller, plan, { job: { holdId, ttlMs: VIDEO_HOLD_TTL_MS } })).reservation;
  }

  /** The reservation's providers, live (the account's own keys where it was BYOK), in the order to try them. */
  async targets(job: ClaimedVideo): Promise<VideoTarget[]> {
    const sealed = await this.deps.sealedProviderKeys(job.keyId);
    return this.deps.calls.targetsOf(job.reservation, sealed).map((target) => {
      const client = target.provider;
      const name = target.route.provider.name;
      // The catalog's fault, not the request's: the worker reports it and tries again later, as any step that throws.
      const missing = () => new Error(`provider ${name} makes no videos`);
      return {
        provider: name,
        upstreamModel: target.route.upstreamModel,
        createVideo: (body) => operationOf(client, 'video_create')?.(body) ?? Promise.reject(missing()),
        getVideo: (id) => operationOf(client, 'video_get')?.(id) ?? Promise.reject(missing()),
        cancelVideo: (id) => operationOf(client, 'video_cancel')?.(id) ?? Promise.reject(missing()),
        videoContent: (id: string, variant: VideoVariant): Promise<BinaryResult> =>
          operationOf(client, 'video_content')?.(id, variant) ?? Promise.reject(missing()),
      };
    });
  }

  async costOf(job: ClaimedVideo, provider: string, request: VideoRequest, providerCostNano: Nano | null): Promise<Nano> {
    const { calls } = this.deps;
    return calls.costOf(calls.pricedTargetOf(job.reservation, answeredBy(job, provider)), usageOf(request.seconds, providerCostNano));
  }

  /** VideoCompleted's cost, charged once: a hold settled already (by this worker before it died) is not an error. */
  async charge(job: ClaimedVideo, state: VideoState): Promise<void> {
    const { calls, clock } = this.deps;
    const { reservation } = job;
    const answered = answeredBy(job, state.provider!);
    const target = calls.pricedTargetOf(reservation, answered);
    const amountNano = state.costNano ?? 0n;
    const { usage, lines, providerCostNano } = videoCharge(state, amountNano, (u) => calls.explainCharge(target, u));
    const latencyMs = state.createdAt ? clock.now().getTime() - state.createdAt.getTime() : 0;
    await calls.settleReservation(reservation, answered, { amountNano, usage, lines, providerCostNano, latencyMs, returned: 1 });
  }

  /** A failed or cancelled video is free: its hold is released; one released already is not an error. */
  async release(job: Pick<ClaimedVideo, 'reservation'>, errorCode: string): Promise<void> {
    await this.deps.calls.releaseReservation(job.reservation, errorCode);
  }
}

/** The reservation's target that `provider` made the clip on. */
function answeredBy(job: ClaimedVideo, provider: string): AnsweredBy {
  const ref = job.reservation.targets.find((t) => t.provider === provider);
  if (!ref) throw new Error(`video ${job.videoId}: ${provider} is no longer a provider of ${job.reservation.targets[0]?.model}`);
  return { model: ref.model, provider: ref.provider, byok: ref.byok };
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
