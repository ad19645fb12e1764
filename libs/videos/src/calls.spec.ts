import { loadCatalog, type CatalogModel, type CatalogRoute, type ModelPrices } from '@svc/catalog';
import { explainCharge, sumOfLines, type PricedTarget } from '@svc/metering';
import { ACCOUNT, AccountLog, meteredCalls, ScriptedUpstream, testCaller } from '@svc/metering/testing/pipeline-fixtures';
import { ManualClock } from '@svc/platform';
import { VideoCalls, videoCharge, VIDEOS_ENDPOINT } from './calls';
import type { ClaimedVideo } from './jobs';
import type { VideoRequest } from './request';
import type { VideoState } from './video';

const none: ModelPrices = {
  inputPerM: null,
  outputPerM: null,
  cachedInputPerM: null,
  perQuery: null,
  perSecond: null,
  perImage: null,
  perMillionCharacters: null,
  perSearchUnit: null,
  audioInputPerM: null,
  cachedAudioInputPerM: null,
  audioOutputPerM: null,
} as unknown as ModelPrices;
// sim/video-router's list price: $0.30 a second; the router reports its own figure.
const prices = { ...none, perSecond: 300_000_000n } as ModelPrices;
const route = { provider: { name: 'sim-router' }, upstreamModel: 'v', prices, cost: null } as unknown as CatalogRoute;
const target: PricedTarget = {
  model: { id: 'sim/video-router', prices } as unknown as CatalogModel,
  route,
  byok: false,
  fields: {},
};
const explain = (usage: Parameters<typeof explainCharge>[1]) => explainCharge(target, usage, 5);

describe('a video charge is explained, its lines adding up to its amount (issue 41 item 15)', () => {
  it('given a clip priced at its seconds, when charged, then the lines are the seconds at the list price', () => {
    const charge = videoCharge({ seconds: 4, providerCostNano: null }, 1_200_000_000n, explain);
    expect(charge.usage).toEqual({ seconds: 4 });
    expect(charge.lines!.map((l) => [l.meter, l.quantity, l.amount_nano])).toEqual([['seconds', 4, '1200000000']]);
  });

  it("given a clip priced at the router's reported cost, when charged, then its meter and line are that cost", () => {
    const charge = videoCharge({ seconds: 4, providerCostNano: 200_000_000n }, 200_000_000n, explain);
    expect(charge.usage).toEqual({ provider_cost: 200_000_000 });
    expect(charge.lines!.map((l) => [l.meter, l.quantity, l.unit_price_usd, l.amount_nano])).toEqual([
      ['provider_cost', 200_000_000, '0.000000001', '200000000'],
    ]);
    expect(charge.providerCostNano).toBe(200_000_000n);
  });

  it('given a reported cost above the hold, when charged the hold, then a hold_cap line takes off the difference', () => {
    const charge = videoCharge({ seconds: 4, providerCostNano: 1_500_000_000n }, 1_200_000_000n, explain);
    expect(charge.lines!.map((l) => [l.meter, l.amount_nano])).toEqual([
      ['provider_cost', '1500000000'],
      ['hold_cap', '-300000000'],
    ]);
    expect(sumOfLines(charge.lines!)).toBe(1_200_000_000n);
  });

  it('given a completion recorded before the reported cost was kept, whose seconds do not make its amount, then it is explained as provider_cost of its amount', () => {
    const charge = videoCharge({ seconds: 4 }, 200_000_000n, explain);
    expect(charge.usage).toEqual({ provider_cost: 200_000_000 });
    expect(sumOfLines(charge.lines!)).toBe(200_000_000n);
  });
});

describe('VideoCalls: a clip billed by whichever worker ends it (spec 4.15, 1 rule 7)', () => {
  const catalog = loadCatalog();
  const model = catalog.get('sim/video')!;
  const routed = { models: [{ model, routes: model.providers.slice(0, 1), fields: {} }], headers: {} };
  // sim/video: $0.10 a second.
  const request = { model: 'sim/video', seconds: 4 } as VideoRequest;

  /** A video asked for by a key with `ownKeys` saved (BYOK), held; its worker then finds no provider key of the account's (deleted since). */
  async function asked(ownKeys: string[] = []) {
    const clock = new ManualClock(new Date('2026-11-02T10:00:00Z'));
    const log = new AccountLog(clock);
    const calls = meteredCalls({ clock, catalog, log, upstreams: { sim: new ScriptedUpstream([]) }, own: { sim: new ScriptedUpstream([]) } });
    const videos = new VideoCalls({
      calls,
      clock,
      sealedProviderKeys: () => Promise.reject(new Error('billing a clip needs no provider key')),
    });
    const caller = testCaller(ownKeys);
    const reservation = await videos.hold(caller, routed, request, 'video_1');
    const job: ClaimedVideo = { videoId: 'video_1', accountId: ACCOUNT, workspaceId: 'ws1', keyId: caller.keyId, reservation };
    const created = clock.now();
    clock.advance(90_000);
    const completed = async () =>
      ({ seconds: 4, provider: 'sim', providerCostNano: null, costNano: await videos.costOf(job, 'sim', request, null), createdAt: created }) as VideoState;
    return { log, videos, job, completed };
  }

  it('given a video completed, when charged, then its cost is charged with its lines and its wait, and a repeated charge adds nothing', async () => {
    const { log, videos, job, completed } = await asked();
    const state = await completed();

    await videos.charge(job, state);
    await videos.charge(job, state);

    expect(state.costNano).toBe(400_000_000n);
    expect(log.decided()).toEqual(['HoldPlaced', 'UsageCharged']);
    const charge = log.only('UsageCharged');
    expect(charge).toMatchObject({ hold_id: 'video_1', amount_nano: '400000000', provider: 'sim', endpoint: VIDEOS_ENDPOINT, latency_ms: 90_000 });
    expect(sumOfLines(charge.lines!)).toBe(400_000_000n);
  });

  it("given a video made on the account's own key, whose key is gone when it completes, when charged, then the BYOK fee is charged all the same", async () => {
    const { log, videos, job, completed } = await asked(['sim']);

    await videos.charge(job, await completed());

    // 5% of the $0.40 the clip lists at.
    expect(log.only('UsageCharged')).toMatchObject({ amount_nano: '20000000', provider: 'sim:byok' });
  });

  it('given a video that failed, when released (twice, as a repeated step), then its hold is given back once, unbilled', async () => {
    const { log, videos, job } = await asked();

    await videos.release(job, 'video_failed');
    await videos.release(job, 'video_failed');

    expect(log.decided()).toEqual(['HoldPlaced', 'HoldReleased']);
    expect(log.only('HoldReleased')).toMatchObject({ hold_id: 'video_1', error_code: 'video_failed', endpoint: VIDEOS_ENDPOINT });
    expect(log.available()).toBe(log.credits);
  });
});
