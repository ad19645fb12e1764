/**
 * A streamed call between its upstream and its client (spec 1 rules 3 and 4, spec 6.2): the
 * upstream's chunks under the generation's id and model, in the interface's wire format, then
 * the settlement's usage and cost, or an error event when the stream broke off, so a client can
 * never take a cut answer for a whole one. The client is a sink: what the process writes to (a
 * response body) is the app's.
 */
import { DomainError } from '@svc/platform';
import { isRecord } from '@svc/providers';
import type { ChatChunk, ChatUsage } from '@svc/providers';

/**
 * Where a stream's frames go: the client's response body. It holds a bounded amount (issue 41
 * F): `write` says when it is full, and the relay then waits for `drained` before it reads its
 * upstream again, so a client that stops reading stops the upstream instead of piling the
 * whole generation up in the process. A client that left drops what is written.
 */
export interface StreamSink {
  /** Sends frames; false when the sink is full. */
  write(frames: string): boolean;
  /** Resolves true once there is room again (or the client is gone); false after `ms` without the client taking anything. */
  drained(ms: number): Promise<boolean>;
  /** Writes the last frames and ends the stream. */
  finish(frames: string): void;
  /** Once finished, drops the client unless it takes the rest within `ms`. */
  abandonAfter(ms: number, reason: Error): void;
}

/** An upstream stream whose first output has arrived, and nothing of it sent yet. */
export interface OpenedStream {
  /** The chunks read so far: the role chunk(s) and the first one with output. */
  head: ChatChunk[];
  rest: AsyncIterator<ChatChunk>;
  /** performance.now() when the upstream call started. */
  startedAt: number;
}

/**
 * Reads the upstream until its first output (or its end). Until then the client has received
 * nothing, so a failure can still move on to the next provider or model, or be answered as a
 * JSON error with its status: an upstream that dies right after its role chunk is an outage,
 * not a stream to cut.
 */
export async function openStream(upstream: AsyncIterator<ChatChunk>): Promise<OpenedStream> {
  const startedAt = performance.now();
  const head: ChatChunk[] = [];
  for (;;) {
    const next = await upstream.next();
    if (next.done) break;
    head.push(next.value);
    if (!isPreamble(next.value)) break;
  }
  return { head, rest: upstream, startedAt };
}

/** Text the upstream delivered, counted for billing when it never reported its usage. */
export interface Delivered {
  content: string;
  reasoning: string;
  toolNames: string;
  toolArguments: string;
}

export interface StreamOutcome {
  /** The upstream's own usage report; null when the stream broke off before it. */
  usage: ChatUsage | null;
  delivered: Delivered;
  /** From the start of the upstream call to its first output. */
  ttftMs: number | null;
  latencyMs: number;
  /** What broke the stream off; null for a clean finish. */
  failure: unknown;
}

/**
 * Writes a chat stream in one wire format: chat completion chunks here, the messages and
 * responses event sequences for the other interfaces. Each call returns SSE frames.
 */
export interface StreamEncoder {
  /** A chunk with output, under the service's id and model. */
  chunk(chunk: ChatChunk): string[];
  /** A clean finish, with the usage billed and its cost. */
  finish(usage: ChatUsage & { cost: number }, finishReason: string | null): string[];
  /** The stream broke off: the error object of what broke it. */
  error(body: object): string[];
}

/**
 * The stream of a client that read nothing of it for `ms` while the gateway held a full buffer
 * for it (issue 41 F). Spec 1 (billing rules): a stream cut short is billed for what was
 * delivered; this one is cut by the gateway, so that a client that stops reading does not keep
 * an upstream connection, a hold and buffers open for as long as it likes.
 */
export class StreamStalled extends DomainError {
  constructor(ms: number) {
    super(
      'stream_stalled',
      `The client read nothing of the stream for ${ms / 1000} s, so it was cut here: the answer above is incomplete, and only what was delivered is billed.`,
      {},
      'client_timeout',
    );
  }
}

/**
 * How long a client may read nothing of a stream whose buffer is full before it is cut
 * (issue 41 F; SVC_STREAM_STALL_MS). A client reading an SSE stream takes every event as it
 * comes, so a stall this long is a client that stopped, not one that is slow; below the 25 s
 * a stopping process gives its streams (SVC_SHUTDOWN_GRACE_MS), so a stalled stream is cut and
 * settled before it exits.
 */
export const STREAM_STALL_MS = 20_000;

export interface RelayOptions {
  /** The generation id and the catalog model, on every chunk (spec 1 rule 2). */
  id: string;
  model: string;
  encoder: StreamEncoder;
  /** Bills the outcome; resolves with the usage billed and its cost in USD. */
  settle(outcome: StreamOutcome): Promise<ChatUsage & { cost: number }>;
  /** The `{"error": {...}}` object for what broke the stream off. */
  errorEvent(failure: unknown): object;
  /**
   * Records what has been delivered so far, every `progressIntervalMs` while the stream runs, so
   * a process killed mid-stream loses at most one interval of output (issue 14.10).
   */
  progress?(sofar: StreamOutcome): Promise<void>;
  progressIntervalMs?: number;
  /** How long the client may leave the sink full before the stream is cut; STREAM_STALL_MS by default. */
  stallMs?: number;
}

/**
 * Relays one stream to its sink and settles it. A client that goes away leaves the relay reading
 * the upstream without writing, because a generation whose client left still completes and is
 * billed (spec 1 rule 4). While the client is there, the upstream is read only as fast as the
 * client takes the sink (issue 41 F): a full sink holds the next read back, and one left full
 * for `stallMs` cuts the stream (StreamStalled).
 */
export class StreamRelay {
  private readonly delivered: Delivered = { content: '', reasoning: '', toolNames: '', toolArguments: '' };
  private usage: ChatUsage | null = null;
  private firstOutputAt: number | null = null;
  private done!: (clean: boolean) => void;
  private finishReason: string | null = null;
  private readonly encoder: StreamEncoder;
  /** Resolves once the relay is over: true for a clean, billed finish; false for a stream cut short. */
  readonly finished = new Promise<boolean>((resolve) => (this.done = resolve));

  constructor(
    private readonly sink: StreamSink,
    private readonly options: RelayOptions,
  ) {
    this.encoder = options.encoder;
  }

  /** Runs until the upstream is done and the generation settled; never rejects for an upstream failure. */
  async run(opened: OpenedStream): Promise<void> {
    const { head, rest, startedAt } = opened;
    let failure: unknown = null;
    const outcome = (): StreamOutcome => ({
      usage: this.usage,
      delivered: { ...this.delivered },
      ttftMs: this.firstOutputAt === null ? null : Math.round(this.firstOutputAt - startedAt),
      latencyMs: Math.round(performance.now() - startedAt),
      failure,
    });
    const { progress, progressIntervalMs } = this.options;
    // One write at a time; a tick while one is on its way is skipped, not queued.
    let recording: Promise<void> | null = null;
    const ticker =
      progress && progressIntervalMs
        ? setInterval(() => {
            recording ??= progress(outcome())
              .catch(() => undefined)
              .finally(() => (recording = null));
          }, progressIntervalMs)
        : undefined;
    try {
      for (const chunk of head) if (!this.relay(chunk)) await this.caughtUp();
      for (let next = await rest.next(); !next.done; next = await rest.next()) if (!this.relay(next.value)) await this.caughtUp();
    } catch (error) {
      failure = error;
      // The upstream is let go so that it stops generating; its connection closes.
      if (error instanceof StreamStalled) await rest.return?.(undefined).catch(() => undefined);
    } finally {
      clearInterval(ticker);
      // Settled after the last progress write, so the settlement is the last word on the hold.
      await recording;
    }

    let last: string[] = [];
    try {
      const billed = await this.options.settle(outcome());
      if (failure === null) last = this.encoder.finish(billed, this.finishReason);
    } catch (error) {
      // The answer went out but its cost is unknown: the client must not see a clean finish.
      failure ??= error;
    } finally {
      if (failure !== null) last = this.encoder.error(this.options.errorEvent(failure));
      this.sink.finish(last.join(''));
      // The client that stalled gets the rest and the error if it reads again soon; else its connection is closed.
      if (failure instanceof StreamStalled) this.sink.abandonAfter(this.stallMs, failure);
      this.done(failure === null);
    }
  }

  private get stallMs(): number {
    return this.options.stallMs ?? STREAM_STALL_MS;
  }

  /** Waits for the client to take some of a full sink; throws StreamStalled when it takes nothing for `stallMs`. */
  private async caughtUp(): Promise<void> {
    if (!(await this.sink.drained(this.stallMs))) throw new StreamStalled(this.stallMs);
  }

  /** Relays one upstream chunk; false when the sink is full and the client must catch up first. */
  private relay(chunk: ChatChunk): boolean {
    if (isRecord(chunk.usage)) this.usage = chunk.usage as ChatUsage;
    const choices = Array.isArray(chunk.choices) ? chunk.choices : [];
    if (this.firstOutputAt === null && choices.some((c) => hasOutput(c.delta))) this.firstOutputAt = performance.now();
    for (const { delta } of choices) this.collect(delta);
    // The upstream's usage chunk (empty choices) is never forwarded: the adapter asks for usage
    // whether or not the client did, and the client's usage chunk must carry the cost.
    if (choices.length === 0) return true;
    for (const choice of choices) if (choice.finish_reason) this.finishReason = choice.finish_reason;
    // The chunk was parsed for this relay alone: restamped in place rather than copied twice
    // per chunk. An undefined usage is not serialised.
    chunk.usage = undefined;
    chunk.id = this.options.id;
    chunk.model = this.options.model;
    return this.write(this.encoder.chunk(chunk));
  }

  private collect(delta: ChatChunk['choices'][number]['delta'] | undefined): void {
    if (!delta) return;
    if (typeof delta.content === 'string') this.delivered.content += delta.content;
    if (typeof delta.reasoning === 'string') this.delivered.reasoning += delta.reasoning;
    for (const call of delta.tool_calls ?? []) {
      this.delivered.toolNames += call.function?.name ?? '';
      this.delivered.toolArguments += call.function?.arguments ?? '';
    }
  }

  private write(frames: string[]): boolean {
    // A client that left has its sink gone: the sink drops what comes after.
    return this.sink.write(frames.length === 1 ? frames[0] : frames.join(''));
  }
}

/** A chunk before any output: the role chunk OpenAI-style upstreams open with. */
function isPreamble(chunk: ChatChunk): boolean {
  if (isRecord(chunk.usage)) return false;
  const choices = Array.isArray(chunk.choices) ? chunk.choices : [];
  return choices.every((c) => c.finish_reason == null && !hasOutput(c.delta));
}

function hasOutput(delta: ChatChunk['choices'][number]['delta'] | undefined): boolean {
  return !!delta && (!!delta.content || !!delta.reasoning || (Array.isArray(delta.tool_calls) && delta.tool_calls.length > 0));
}
