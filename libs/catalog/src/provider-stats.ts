/**
 * Rolling speed figures per provider (issue 5: `provider.sort` and `:nitro`), kept in memory by
 * each gateway process. They are a routing hint, not a record: a restart starts them afresh, and
 * several processes may each see a slightly different picture.
 *
 * Figures are kept per provider AND model: one provider serves a small model far faster than a
 * large one, so a provider-wide average would rank providers by the mix of models they served.
 */

/** Weight of the newest observation: recent enough to follow a provider that slows down, smooth enough not to flip on one slow answer. */
export const EWMA_ALPHA = 0.3;

export interface ProviderFigures {
  /** Whole request, ms. */
  latencyMs: number;
  /** Time to the first streamed token, ms; null until a streamed request was measured. */
  ttftMs: number | null;
  /** Completion tokens per second of generation; null until an answer with tokens was measured. */
  tokensPerSecond: number | null;
  samples: number;
}

/** What the router reads. */
export interface ProviderStatsView {
  figures(modelId: string, provider: string): ProviderFigures | undefined;
}

export interface Observation {
  latencyMs: number;
  /** Null for a non-streamed request. */
  ttftMs: number | null;
  completionTokens: number;
}

export class ProviderStats implements ProviderStatsView {
  private readonly byRoute = new Map<string, ProviderFigures>();

  constructor(private readonly alpha = EWMA_ALPHA) {}

  figures(modelId: string, provider: string): ProviderFigures | undefined {
    const f = this.byRoute.get(key(modelId, provider));
    return f === undefined ? undefined : { ...f };
  }

  /** After each answered request; failures are not speed figures and are not recorded. */
  record(modelId: string, provider: string, o: Observation): void {
    const k = key(modelId, provider);
    const before = this.byRoute.get(k);
    const tps = tokensPerSecond(o);
    const avg = (old: number | null | undefined, next: number | null): number | null =>
      next === null ? (old ?? null) : old === null || old === undefined ? next : old + this.alpha * (next - old);
    this.byRoute.set(k, {
      latencyMs: avg(before?.latencyMs, o.latencyMs)!,
      ttftMs: avg(before?.ttftMs, o.ttftMs),
      tokensPerSecond: avg(before?.tokensPerSecond, tps),
      samples: (before?.samples ?? 0) + 1,
    });
  }
}

/**
 * Tokens per second of generation: for a stream, from the first token on (the wait before it is
 * latency, measured on its own); a non-streamed answer only has the whole request to go by.
 */
function tokensPerSecond(o: Observation): number | null {
  if (o.completionTokens <= 0) return null;
  const generatingMs = o.ttftMs !== null && o.latencyMs > o.ttftMs ? o.latencyMs - o.ttftMs : o.latencyMs;
  return (o.completionTokens * 1000) / Math.max(generatingMs, 1);
}

function key(modelId: string, provider: string): string {
  return `${modelId}\u0000${provider}`;
}
