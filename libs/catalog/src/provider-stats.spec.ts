import { ProviderStats } from './provider-stats';

describe('ProviderStats', () => {
  it('knows nothing of a provider before its first answer', () => {
    expect(new ProviderStats().figures('m', 'p')).toBeUndefined();
  });

  it('starts from the first observation, then moves a fraction alpha towards each new one', () => {
    const stats = new ProviderStats(0.5);
    stats.record('m', 'p', { latencyMs: 1000, ttftMs: null, completionTokens: 100 });
    expect(stats.figures('m', 'p')).toEqual({ latencyMs: 1000, ttftMs: null, tokensPerSecond: 100, samples: 1 });
    stats.record('m', 'p', { latencyMs: 2000, ttftMs: null, completionTokens: 100 });
    expect(stats.figures('m', 'p')).toEqual({ latencyMs: 1500, ttftMs: null, tokensPerSecond: 75, samples: 2 });
  });

  it('measures a stream from its first token, and keeps ttft from streams only', () => {
    const stats = new ProviderStats(0.5);
    stats.record('m', 'p', { latencyMs: 1100, ttftMs: 100, completionTokens: 50 });
    expect(stats.figures('m', 'p')).toMatchObject({ ttftMs: 100, tokensPerSecond: 50 });
    // A later non-streamed answer leaves the ttft figure as it was.
    stats.record('m', 'p', { latencyMs: 500, ttftMs: null, completionTokens: 50 });
    expect(stats.figures('m', 'p')).toMatchObject({ ttftMs: 100, latencyMs: 800, tokensPerSecond: 75 });
  });

  it('takes no throughput from an answer without tokens', () => {
    const stats = new ProviderStats();
    stats.record('m', 'p', { latencyMs: 300, ttftMs: null, completionTokens: 0 });
    expect(stats.figures('m', 'p')).toMatchObject({ latencyMs: 300, tokensPerSecond: null });
  });

  it('keeps each model of a provider apart', () => {
    const stats = new ProviderStats();
    stats.record('big', 'p', { latencyMs: 5000, ttftMs: null, completionTokens: 10 });
    stats.record('small', 'p', { latencyMs: 100, ttftMs: null, completionTokens: 10 });
    expect(stats.figures('big', 'p')!.tokensPerSecond).toBe(2);
    expect(stats.figures('small', 'p')!.tokensPerSecond).toBe(100);
  });
});
