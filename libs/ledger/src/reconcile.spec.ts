import type { RecordedEvent } from '@svc/eventstore';
import { parsePeriod } from './export';
import { formatReconciliation, marginPercent, Reconciler, reconciliationJson } from './reconcile';

let n = 0;
const charged = (
  provider: string,
  model: string,
  amount: bigint,
  cost: bigint | null,
  at = '2026-11-02T10:00:00.000Z',
  over: Record<string, unknown> = {},
): RecordedEvent => {
  n++;
  return {
    id: `e${n}`,
    type: 'UsageCharged',
    stream: 'account-acme',
    revision: BigInt(n),
    position: `00000000000000000001/${String(n).padStart(20, '0')}`,
    metadata: { at },
    data: {
      account_id: 'acme',
      hold_id: `gen-${n}`,
      key_id: 'k1',
      amount_nano: amount.toString(),
      model,
      provider,
      endpoint: '/v1/chat/completions',
      prompt_tokens: 1,
      completion_tokens: 1,
      cached_tokens: 0,
      reasoning_tokens: 0,
      latency_ms: 1,
      ttft_ms: null,
      ...(cost === null ? {} : { provider_cost_nano: cost.toString() }),
      ...over,
    },
  };
};

const reconcile = (events: RecordedEvent[], period = parsePeriod({ from: '2026-11-02', to: '2026-11-03' })) => {
  const r = new Reconciler(period);
  for (const e of events) r.observe(e);
  return r.finish();
};

describe('ledger reconcile', () => {
  it('given charges with known costs, when reconciled, then each (provider, model) shows what was charged, the cost and the margin', () => {
    const r = reconcile([charged('sim', 'sim/echo', 1000n, 600n), charged('sim', 'sim/echo', 3000n, 2000n), charged('openai', 'gpt', 500n, 500n)]);
    expect(r.groups.map((g) => [g.provider, g.model, g.requests, g.chargedNano, g.providerCostNano, marginPercent(g)])).toEqual([
      ['openai', 'gpt', 1, 500n, 500n, '0.00'],
      ['sim', 'sim/echo', 2, 4000n, 2600n, '35.00'],
    ]);
    expect(r.totals).toMatchObject({ requests: 3, chargedNano: 4500n, providerCostNano: 3100n, unknownRequests: 0 });
    expect(r.unknown).toEqual([]);
  });

  it('given charges whose cost is unknown, when reconciled, then the margin is over the known ones only, and the unknown are counted, summed and listed', () => {
    const r = reconcile([charged('sim', 'sim/echo', 1000n, 900n), charged('sim', 'sim/echo', 7000n, null)]);
    const [g] = r.groups;
    expect(g).toMatchObject({
      requests: 2,
      chargedNano: 8000n,
      knownRequests: 1,
      chargedKnownNano: 1000n,
      providerCostNano: 900n,
      unknownRequests: 1,
      unknownChargedNano: 7000n,
    });
    // Not 8000 - 900 over 8000: an unknown cost is not a free one.
    expect(marginPercent(g)).toBe('10.00');
    expect(r.unknown).toEqual([
      expect.objectContaining({ generationId: expect.stringMatching(/^gen-/), provider: 'sim', model: 'sim/echo', chargedNano: 7000n, accountId: 'acme' }),
    ]);
  });

  it('given BYOK charges, when reconciled, then they are apart, fees only, and never listed as an unknown cost', () => {
    const r = reconcile([charged('openai:byok', 'gpt', 50n, null), charged('openai:byok', 'gpt', 70n, 0n), charged('openai', 'gpt', 1000n, 800n)]);
    expect(r.groups).toHaveLength(1);
    expect(r.byok).toEqual([expect.objectContaining({ provider: 'openai', model: 'gpt', byok: true, requests: 2, chargedNano: 120n })]);
    expect(r.unknown).toEqual([]);
    expect(JSON.parse(reconciliationJson(r)).byok).toEqual([{ provider: 'openai', model: 'gpt', requests: 2, fees_usd: '0.000000120' }]);
  });

  it('given a negative margin, when reconciled, then the percentage rounds half away from zero', () => {
    const r = reconcile([charged('sim', 'm', 3n, 4n)]);
    expect(marginPercent(r.groups[0])).toBe('-33.33');
    expect(marginPercent(reconcile([charged('sim', 'm', 8n, 7n)]).groups[0])).toBe('12.50');
    expect(marginPercent(reconcile([charged('sim', 'm', 3n, 1n)]).groups[0])).toBe('66.67');
  });

  it("given charges outside the period by charged_at, and other events, when reconciled, then only the period's charges count", () => {
    const r = reconcile([
      charged('sim', 'm', 1n, 1n, '2026-11-02T23:59:00.000Z', { charged_at: '2026-11-03T00:00:00.000Z' }),
      charged('sim', 'm', 2n, 1n, '2026-11-01T23:00:00.000Z', { charged_at: '2026-11-02T00:00:00.000Z' }),
      { ...charged('sim', 'm', 4n, 1n), type: 'HoldPlaced' },
    ]);
    expect(r.totals).toMatchObject({ requests: 1, chargedNano: 2n });
    expect(r.scanned).toBe(3);
  });

  it('lists at most the limit of unknown generations in text, all of them in JSON', () => {
    const r = reconcile(Array.from({ length: 25 }, () => charged('sim', 'm', 10n, null)));
    const text = formatReconciliation(r, 20);
    expect(text).toContain('Generations with an unknown provider cost: 25 (first 20; all of them with --json)');
    expect(text.filter((l) => /^ {2}gen-/.test(l))).toHaveLength(20);
    expect(JSON.parse(reconciliationJson(r)).unknown_provider_cost).toHaveLength(25);
    const header = text.find((l) => l.startsWith('provider'))!;
    expect(header).toMatch(/requests\s+charged\s+cost known\s+charged \(known\)\s+provider cost\s+margin\s+margin %\s+cost unknown\s+charged \(unknown\)/);
    expect(text.find((l) => l.startsWith('(all)'))).toMatch(
      /^\(all\)\s+\(all\)\s+25\s+\$0\.000000250\s+0\s+\$0\.000000000\s+\$0\.000000000\s+\$0\.000000000\s+n\/a\s+25\s+\$0\.000000250$/,
    );
  });
});
