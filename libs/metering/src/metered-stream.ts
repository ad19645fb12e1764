/**
 * The billing of a streamed call (spec 1 rules 3 and 4): what it delivered is recorded as it
 * runs, so a process killed mid-stream loses at most one interval of output (issue 14.10), and
 * its settlement lands whatever happens to the client or the store (issue 41 A).
 */
import type { GenerationStats, TokenUsage } from '@svc/ledger';
import type { Nano } from '@svc/platform';
import { countTextTokens, normalizeUsage } from '@svc/providers';
import type { ChatUsage } from '@svc/providers';
import { tokenMeters, type MeterUsage } from './meters';
import type { MeteredCalls } from './pipeline';
import type { Metered, Settlement } from './reservation';
import { settleDurably } from './settle-durably';
import type { Delivered, StreamOutcome } from './stream';
import type { Target } from './targets';

/** What a running stream has delivered, priced as its charge would be: for the hold reaper to charge should the process die. */
export interface StreamProgress {
  holdId: string;
  accountId: string;
  amountNano: Nano;
  stats: GenerationStats;
}

/** Where a running stream's progress is kept, outside the account's stream (the `stream_progress` read model). */
export interface StreamProgressStore {
  record(progress: StreamProgress): Promise<void>;
  /** Drops a settled stream's progress; a row left behind is harmless and pruned by the worker. */
  forget(holdId: string): Promise<void>;
}

/** How a stream was billed. */
export interface StreamBill {
  /** The tokens billed: the upstream's report, else what was delivered. */
  usage: TokenUsage;
  /** Its OpenAI wire shape, as the client's usage chunk carries it. */
  wire: ChatUsage;
  charged: Nano;
  /** Nothing was delivered: the hold was released, nothing charged. */
  released: boolean;
}

/**
 * One streamed chat call of the pipeline, from its first output to its settlement: held and
 * answered by `target`, billed by tokens plus `toolUsage` (the web searches it ran).
 */
export class MeteredStream {
  /** Whether progress was recorded: its row is dropped once the stream is settled. */
  private progressRecorded = false;

  constructor(
    private readonly calls: MeteredCalls,
    private readonly metered: Metered,
    private readonly target: Target,
    private readonly options: { toolUsage?: MeterUsage; progress?: StreamProgressStore; warn(message: string): void },
  ) {}

  /** Records what the stream delivered so far; nothing while it delivered no output. */
  async record(sofar: StreamOutcome): Promise<void> {
    const { progress } = this.options;
    const usage = this.usageOf(sofar);
    if (!progress || usage.completionTokens === 0) return;
    const { reservation } = this.metered;
    const settlement = this.settlementOf(usage);
    const stats = { ...this.calls.statsOf(reservation, this.target, settlement), latency_ms: sofar.latencyMs, ttft_ms: sofar.ttftMs };
    await progress.record({ holdId: reservation.id, accountId: reservation.accountId, amountNano: this.calls.costOf(this.target, settlement.usage), stats });
    this.progressRecorded = true;
  }

  /**
   * A clean finish is billed from the upstream's usage; a stream cut short only for what it
   * delivered (the prompt as counted here, plus the tokens of the text that arrived), and not at
   * all when nothing arrived: its hold is released.
   */
  async settle(outcome: StreamOutcome): Promise<StreamBill> {
    const { calls, metered, target } = this;
    const usage = this.usageOf(outcome);
    const wire = outcome.usage ?? wireUsage(usage);
    if (outcome.failure !== null && usage.completionTokens === 0) {
      await settleDurably(
        () => calls.release(metered.reservation, target, outcome.failure, outcome.latencyMs),
        async () => undefined,
      );
      await this.forget();
      return { usage, wire: wireUsage(usage), charged: 0n, released: true };
    }
    const settlement: Settlement = { ...this.settlementOf(usage), latencyMs: outcome.latencyMs, ttftMs: outcome.ttftMs };
    // The client has the output: the charge lands, now or through the hold reaper (issue 41 A).
    const charged = await calls.settleDelivered(metered, target, settlement);
    await this.forget();
    return { usage, wire, charged, released: false };
  }

  /** A stream's usage: the upstream's report once it came, else what was delivered. */
  private usageOf(outcome: StreamOutcome): TokenUsage {
    return outcome.usage ? normalizeUsage(outcome.usage) : deliveredUsage(this.metered.reservation.promptTokens, outcome.delivered);
  }

  private settlementOf(usage: TokenUsage): Pick<Settlement, 'usage' | 'reasoningTokens'> {
    return tokenSettlement(usage, this.options.toolUsage);
  }

  private async forget(): Promise<void> {
    const { progress } = this.options;
    if (!progress || !this.progressRecorded) return;
    const { id } = this.metered.reservation;
    await progress.forget(id).catch((err: unknown) => this.options.warn(`${id}: progress not forgotten: ${(err as Error).message}`));
  }
}

/** A chat answer's tokens as the pipeline bills them: by meter, with reasoning shown apart (spec 2.6), and the tools it ran. */
export function tokenSettlement(usage: TokenUsage, toolUsage: MeterUsage = {}): Pick<Settlement, 'usage' | 'reasoningTokens'> {
  return { usage: { ...tokenMeters(usage), ...toolUsage }, reasoningTokens: usage.reasoningTokens };
}

/** What a stream cut short delivered, counted the way the simulator and OpenAI count output. */
export function deliveredUsage(promptTokens: number, delivered: Delivered): TokenUsage {
  const reasoning = countTextTokens(delivered.reasoning);
  const tools = delivered.toolNames || delivered.toolArguments ? countTextTokens(delivered.toolNames) + countTextTokens(delivered.toolArguments) : 0;
  return {
    promptTokens,
    completionTokens: reasoning + countTextTokens(delivered.content) + tools,
    cachedTokens: 0,
    reasoningTokens: reasoning,
  };
}

function wireUsage(usage: TokenUsage): ChatUsage {
  return {
    prompt_tokens: usage.promptTokens,
    completion_tokens: usage.completionTokens,
    total_tokens: usage.promptTokens + usage.completionTokens,
    prompt_tokens_details: { cached_tokens: usage.cachedTokens },
    completion_tokens_details: { reasoning_tokens: usage.reasoningTokens },
  };
}
