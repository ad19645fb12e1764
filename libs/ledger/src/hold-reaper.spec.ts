import { deciderSpec } from '@svc/eventstore/testing/decider-spec';
import { accountDecider } from './account';
import { reapCommand } from './hold-reaper';
import { charged, credited, held, opened, stats } from './testing/account-fixtures';

const spec = deciderSpec(accountDecider);

/** Issue 14.10: what the reaper decides for a hold whose gateway died. */
describe("reaping a dead gateway's hold", () => {
  it('charges what the gateway recorded as delivered', () => {
    const command = reapCommand({ holdId: 'h1', accountId: 'a1', progress: { amountNano: 700n, stats: stats({ completion_tokens: 7 }) } });
    expect(command).toEqual({ type: 'ChargeUsage', holdId: 'h1', amountNano: 700n, stats: stats({ completion_tokens: 7 }), reaped: true });
  });

  it('releases a hold of which nothing delivered was recorded (spec 1 rule 3: nothing returned is not billed)', () => {
    expect(reapCommand({ holdId: 'h1', accountId: 'a1', progress: null })).toEqual({
      type: 'ReleaseHold',
      holdId: 'h1',
      errorCode: 'gateway_lost',
      reaped: true,
    });
    expect(reapCommand({ holdId: 'h1', accountId: 'a1', progress: { amountNano: 5n, stats: stats({ completion_tokens: 0 }) } })).toMatchObject({
      type: 'ReleaseHold',
    });
  });

  // Issue 41 A: a charge its gateway could not land is landed as decided, not re-derived.
  it('charges a final charge with its meters, cost lines, provider cost and what it returned', () => {
    const lines = [{ meter: 'output', quantity: 3, unit_price_usd: '0.0000001', amount_nano: '300' }];
    const command = reapCommand({
      holdId: 'h1',
      accountId: 'a1',
      progress: { amountNano: 300n, stats: stats({ completion_tokens: 0 }), charge: { usage: { output: 3 }, lines, provider_cost_nano: '120', returned: 2 } },
    });
    expect(command).toEqual({
      type: 'ChargeUsage',
      holdId: 'h1',
      amountNano: 300n,
      stats: stats({ completion_tokens: 0 }),
      usage: { output: 3 },
      lines,
      providerCostNano: 120n,
      returned: 2,
      reaped: true,
    });
  });

  it('cannot settle a hold twice: one its gateway settled after all is refused as not open', () => {
    const reaped = reapCommand({ holdId: 'h1', accountId: 'a1', progress: { amountNano: 700n, stats: stats({ completion_tokens: 7 }) } });
    spec
      .given([opened, credited(1_000_000n), held('h9', 1000n)])
      .when(reaped)
      .thenThrows('hold_not_open');
    spec
      .given([opened, credited(1_000_000n), held('h1', 1000n), charged('h1', 900n, '2026-11-02T10:00:00.000Z')])
      .when(reaped)
      .thenThrows('hold_not_open');
  });
});
