/**
 * What the metering pipeline learned of one generation, for the log line of the request that
 * made it (issue 22): the provider that answered, the time spent upstream and what was charged.
 * Streams settle after their headers are sent, so the line is written from this when the
 * response ends.
 */
export interface RequestRecord {
  /** The last provider that answered (`<name>:byok` on the account's own key). */
  provider?: string;
  /** The last provider that failed, when none answered after it. */
  failedProvider?: string;
  /**
   * The catalog model its hold was placed for: what a request that names no `model` in a JSON
   * body (a transcription's form, a search's engine) is labelled with.
   */
  model?: string;
  upstreamSeconds: number;
  chargedNano: bigint;
  charged: boolean;
}

/** Notes kept at most: past it the oldest go (a job's, which no request line takes, or a request's past its line). */
const MAX_NOTES = 50_000;

/**
 * The pipeline's reports by generation id, taken by the request log when the response that
 * named the generation ends. Keyed by id rather than carried in the request's async context:
 * an AsyncLocalStorage on every request turns on Node 20's promise hooks for the whole process,
 * which cost ~13% of billed requests per second in the benchmark. Work outside a request (batch
 * lines, videos, realtime responses) is noted too and never taken; the bound keeps that small
 * (some 7 MB at most), and a request whose note was pushed out (a stream outliving 50,000 newer
 * generations) logs without its provider and cost.
 */
export class GenerationNotes {
  private readonly notes = new Map<string, RequestRecord>();
  /** What each response's readers (its log line, its metric) took: the first takes, the others share. */
  private readonly taken = new WeakMap<object, RequestRecord | null>();
  /** Off until a request log will take them: a process without one (the worker) keeps none. */
  enabled = false;

  constructor(private readonly max = MAX_NOTES) {}

  held(generationId: string, model: string): void {
    const record = this.note(generationId);
    if (record) record.model = model;
  }

  upstreamAnswered(generationId: string, provider: string, seconds: number): void {
    const record = this.note(generationId);
    if (!record) return;
    record.provider = provider;
    record.failedProvider = undefined;
    record.upstreamSeconds += seconds;
  }

  upstreamFailed(generationId: string, provider: string, seconds: number): void {
    const record = this.note(generationId);
    if (!record) return;
    record.failedProvider = provider;
    record.upstreamSeconds += seconds;
  }

  charged(generationId: string, amountNano: bigint): void {
    const record = this.note(generationId);
    if (!record) return;
    record.charged = true;
    record.chargedNano += amountNano;
  }

  /** The generation's record, forgotten once taken. */
  take(generationId: string): RequestRecord | undefined {
    const record = this.notes.get(generationId);
    if (record) this.notes.delete(generationId);
    return record;
  }

  /**
   * The record of the generation a response named (`owner` is its request), taken on the first
   * call and the same for every later call about that response.
   */
  takeFor(owner: object, generationId: unknown): RequestRecord | undefined {
    const seen = this.taken.get(owner);
    if (seen !== undefined) return seen ?? undefined;
    const record = typeof generationId === 'string' ? this.take(generationId) : undefined;
    this.taken.set(owner, record ?? null);
    return record;
  }

  get size(): number {
    return this.notes.size;
  }

  private note(generationId: string): RequestRecord | undefined {
    if (!this.enabled) return undefined;
    let record = this.notes.get(generationId);
    if (!record) {
      record = { upstreamSeconds: 0, chargedNano: 0n, charged: false };
      this.notes.set(generationId, record);
      // A Map iterates in insertion order: the first key is the oldest note.
      if (this.notes.size > this.max) this.notes.delete(this.notes.keys().next().value as string);
    }
    return record;
  }
}
