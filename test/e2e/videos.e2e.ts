import OpenAI, { toFile } from 'openai';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { usdToNano } from '@svc/platform';
import { startSimulator, type Simulator } from '@svc/providers';
import { verifyWebhookSignature } from '@svc/webhooks';
import { VideoCalls } from '@svc/videos';
import { api, startGateway, stopGateway, type Call, type StartedGateway } from '../support/gateway';
import { accountWithKey, creditsOf as baseCreditsOf, generationOf, rejectionOf, type Credits as BaseCredits } from '../support/interfaces';
import { until } from '../support/until';

/**
 * Spec 4.15, 2.4, 3.1 and 6.1: video jobs through the official openai SDK (its `videos.create`
 * sends a multipart form; our own fields ride along as extra form fields), run by the video
 * worker that `npm start` runs beside the gateway, against the simulated upstream.
 *
 * The test starts its own simulator with 6 s clips (the worker polls a provider at most once
 * every 2 s, so a clip that long is seen `in_progress` on the way) and points both gateways at it. Clips are
 * independent, so they are all started at once in beforeAll, each on an account of its own
 * (balances stay exact), and each test awaits the story of its own clip.
 *
 * Two gateways: the main one keeps the production default (no private or http URLs leave it,
 * which the image_url checks need); the second allows them (SVC_WEBHOOK_ALLOW_PRIVATE), which a
 * webhook receiver on 127.0.0.1 needs.
 */

const VIDEO_JOB_MS = 6_000;
/** The worker's lease is 3 x this + 5 s: a step that failed is tried again that long after it was claimed. */
const UPSTREAM_TIMEOUT_MS = 1_500;
const LEASE_MS = UPSTREAM_TIMEOUT_MS * 3 + 5_000;
const FINAL = ['completed', 'failed', 'cancelled'];
const INJECTED = 'injected: the ledger was unreachable';
const VIDEO_ID = /^video_[0-9a-f]{24}$/;

type Video = OpenAI.Videos.Video & {
  status: OpenAI.Videos.Video['status'] | 'cancelled';
  aspect_ratio: string | null;
  resolution: string | null;
  url: string | null;
  thumbnail_url: string | null;
  usage: { cost: number; estimated_cost: number };
};

/** One GET /v1/videos/{id} as the SDK saw it, with the poll headers the response carried. */
interface Seen {
  video: Video;
  pollAfterMs: string | null;
  retryAfter: string | null;
}

/** A clip's story: what create answered, every poll, the end. */
interface Story {
  key: string;
  before: Credits;
  created: Video;
  /** Right after the create. */
  heldAfterCreate: Credits;
  generationId: string | null;
  seen: Seen[];
  final: Video;
}

/** What a running video answered: its content (refused), a GET through fetch, and the DELETE. */
interface WhileRunning {
  content: InstanceType<typeof OpenAI.APIError>;
  get: { status: number; pollAfterMs: string | null; retryAfter: string | null };
  cancel: { status: number; json: any; pollAfterMs: string | null };
}

/** GET /v1/credits with the lifetime usage too. */
type Credits = BaseCredits & { total_usage: number };

/** The webhook receiver: every delivery, raw, as it arrived. */
interface Delivery {
  headers: IncomingMessage['headers'];
  raw: string;
  body: { id: string; type: string; created: number; data: Record<string, any> };
}

const creditsOf = async (call: Call, key: string) => (await baseCreditsOf(call, key)) as Credits;
const nano = (usd: number | string) => usdToNano(String(usd));
const sdkRefusal = (promise: Promise<unknown>) => rejectionOf(promise, OpenAI.APIError);
/** Lets a promise started early be awaited later by its test, without an unhandled rejection meanwhile. */
const early = <T>(promise: Promise<T>): Promise<T> => {
  promise.catch(() => undefined);
  return promise;
};

describe('videos (spec 4.15, 2.4, 3.1, 6.1)', () => {
  let sim: Simulator;
  let gw: StartedGateway;
  let hooked: StartedGateway;
  let call: Call;
  let receiver: Server;
  let secret: string;
  const deliveries: Delivery[] = [];

  const sdkOf = (key: string, on: StartedGateway = gw) => new OpenAI({ baseURL: on.url, apiKey: key, maxRetries: 0 });

  /** Creates a clip through the SDK (extra fields as extra form fields) and polls it with the SDK until it ends. */
  async function story(
    on: StartedGateway,
    key: string,
    body: Record<string, unknown>,
    onRunning?: (video: Video, sdk: OpenAI) => Promise<void>,
  ): Promise<Story> {
    const sdk = sdkOf(key, on);
    const before = await creditsOf(api(on.url), key);
    const { data, response } = await sdk.videos.create(body as unknown as OpenAI.Videos.VideoCreateParams).withResponse();
    const created = data as Video;
    const heldAfterCreate = await creditsOf(api(on.url), key);
    const seen: Seen[] = [];
    let acted = false;
    const final = await until(
      `video ${created.id} to end`,
      async () => {
        const polled = await sdk.videos.retrieve(created.id).withResponse();
        const video = polled.data as Video;
        seen.push({ video, pollAfterMs: polled.response.headers.get('openai-poll-after-ms'), retryAfter: polled.response.headers.get('retry-after') });
        if (onRunning && !acted && video.status === 'in_progress') {
          acted = true;
          await onRunning(video, sdk);
        }
        return FINAL.includes(video.status) ? video : null;
      },
      25_000,
      150,
    );
    return { key, before, created, heldAfterCreate, generationId: response.headers.get('x-svc-generation-id'), seen, final };
  }

  /** The hold of a clip is settled by the worker just after the end is recorded: wait for it, then read the credits. */
  const settledCredits = (key: string, on: StartedGateway = gw) =>
    until(
      `the holds of ${key.slice(0, 12)} to settle`,
      async () => {
        const credits = await creditsOf(api(on.url), key);
        return credits.open_holds === 0 ? credits : null;
      },
      10_000,
    );

  let completed: Promise<Story>;
  let routed480: Promise<Story>;
  let routedSize: Promise<Story>;
  let failed: Promise<Story>;
  let cancelled: Promise<Story & { whileRunning: WhileRunning }>;
  let hookedClips: Promise<[Story, Story]>;
  let sizedForOpenAi: Promise<Story>;
  let chargeRetried: Promise<Story & { after: Credits }>;
  let deletedBeforeCharge: Promise<Story & { heldAtDelete: Credits; deleted: unknown; after: Credits }>;
  /** Accounts whose first video charge fails, as if the worker died between the recorded end and the charge. */
  const chargeFailsOnce = new Set<string>();

  beforeAll(async () => {
    receiver = createServer((req, res) => {
      let raw = '';
      req.on('data', (c) => (raw += c));
      req.on('end', () => {
        deliveries.push({ headers: req.headers, raw, body: JSON.parse(raw) });
        res.writeHead(200).end('ok');
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    sim = await startSimulator({ videoJobMs: VIDEO_JOB_MS });
    [gw, hooked] = await Promise.all([
      startGateway({ SVC_SIMULATOR_URL: sim.url, SVC_UPSTREAM_TIMEOUT_MS: String(UPSTREAM_TIMEOUT_MS) }),
      startGateway({ SVC_SIMULATOR_URL: sim.url, SVC_WEBHOOK_ALLOW_PRIVATE: 'true' }),
    ]);
    call = api(gw.url);
    // The worker's charge, through the app's own VideoCalls; for the accounts listed, the first one fails.
    const calls = gw.app.get(VideoCalls);
    const charge = calls.charge.bind(calls);
    jest.spyOn(calls, 'charge').mockImplementation(async (job, state) => {
      if (chargeFailsOnce.delete(job.accountId)) throw new Error(INJECTED);
      return charge(job, state);
    });
    // The worker's warning about it is expected; any other is shown.
    const warn = console.warn.bind(console);
    jest.spyOn(console, 'warn').mockImplementation((...args: unknown[]) => void (String(args[0]).includes(INJECTED) ? undefined : warn(...args)));
    const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
    const saved = await api(hooked.url)('PUT', '/settings/webhook', {
      key: hooked.keys.management_key,
      body: { url, events: ['video.completed', 'video.failed'] },
    });
    expect(saved.status).toBe(200);
    secret = saved.json.secret;

    // Every clip at once, each on an account of its own.
    const fresh = async () => (await accountWithKey(gw, 10)).key;
    completed = early(fresh().then((key) => story(gw, key, { model: 'sim/video', prompt: 'a lighthouse at dusk', seconds: '8', aspect_ratio: '16:9' })));
    routed480 = early(fresh().then((key) => story(gw, key, { model: 'sim/video-router', prompt: 'a red kite over hills', seconds: '4', resolution: '480p' })));
    routedSize = early(fresh().then((key) => story(gw, key, { model: 'sim/video-router', prompt: 'a red kite over a valley', seconds: '4', size: '854x480' })));
    failed = early(fresh().then((key) => story(gw, key, { model: 'sim/video', prompt: 'a storm at sea\n#sim {"fail": true}', seconds: '4' })));
    cancelled = early(
      fresh().then(async (key) => {
        let whileRunning: WhileRunning | undefined;
        const told = await story(gw, key, { model: 'sim/video', prompt: 'an endless corridor\n#sim {"stall": true}', seconds: '4' }, async (video, sdk) => {
          const auth = { authorization: `Bearer ${key}` };
          const content = await sdkRefusal(sdk.videos.downloadContent(video.id));
          const get = await fetch(`${gw.url}/videos/${video.id}`, { headers: auth });
          await get.text();
          const cancel = await fetch(`${gw.url}/videos/${video.id}`, { method: 'DELETE', headers: auth });
          whileRunning = {
            content,
            get: { status: get.status, pollAfterMs: get.headers.get('openai-poll-after-ms'), retryAfter: get.headers.get('retry-after') },
            cancel: { status: cancel.status, json: await cancel.json(), pollAfterMs: cancel.headers.get('openai-poll-after-ms') },
          };
        });
        return { ...told, whileRunning: whileRunning! };
      }),
    );
    sizedForOpenAi = early(fresh().then((key) => story(gw, key, { model: 'sim/video', prompt: 'a tram in the rain', seconds: '4', size: '1920x1080' })));
    const failingCharge = async () => {
      const { accountId, key } = await accountWithKey(gw, 10);
      chargeFailsOnce.add(accountId);
      return key;
    };
    /**
     * The credits once the hold is settled, or as they are when the worker's retry is overdue:
     * the step that recorded the end was claimed before the end was seen, so the retry comes
     * within a lease (and a tick of the worker) of that.
     */
    const settledByRetry = async (key: string) => {
      const overdue = Date.now() + LEASE_MS + 4_000;
      for (;;) {
        const credits = await creditsOf(api(gw.url), key);
        if (credits.open_holds === 0 || Date.now() > overdue) return credits;
        await sleep(250);
      }
    };
    chargeRetried = early(
      failingCharge().then(async (key) => {
        const told = await story(gw, key, { model: 'sim/video', prompt: 'a windmill', seconds: '4' });
        return { ...told, after: await settledByRetry(key) };
      }),
    );
    deletedBeforeCharge = early(
      failingCharge().then(async (key) => {
        const told = await story(gw, key, { model: 'sim/video', prompt: 'a harbour', seconds: '4' });
        // Completed, its charge not landed yet: the client downloads the clip and deletes the video.
        const heldAtDelete = await creditsOf(api(gw.url), key);
        // Read whole: a response left unread holds its request open, and the gateway's close waits for it.
        const clip = await sdkOf(key).videos.downloadContent(told.created.id);
        await clip.arrayBuffer();
        const deleted = await sdkOf(key).videos.delete(told.created.id);
        return { ...told, heldAtDelete, deleted, after: await settledByRetry(key) };
      }),
    );
    hookedClips = early(
      Promise.all([
        story(hooked, hooked.keys.api_key, { model: 'sim/video', prompt: 'a paper boat', seconds: '4' }),
        story(hooked, hooked.keys.api_key, { model: 'sim/video', prompt: 'a paper plane\n#sim {"fail": true}', seconds: '4' }),
      ]),
    );
  }, 60_000);

  afterAll(async () => {
    await Promise.allSettled([completed, routed480, routedSize, failed, cancelled, hookedClips, sizedForOpenAi, chargeRetried, deletedBeforeCharge]);
    await Promise.all([stopGateway(gw), stopGateway(hooked)]);
    await sim?.close();
    await new Promise((resolve) => receiver?.close(resolve));
  }, 30_000);

  it('4.15/2.4/3.1: queued with the estimate held, seen in_progress with progress, then completed with url and thumbnail_url; poll headers only while not final', async () => {
    const { key, before, created, heldAfterCreate, seen, final, generationId } = await completed;
    expect(created).toMatchObject({
      id: expect.stringMatching(VIDEO_ID),
      object: 'video',
      model: 'sim/video',
      status: 'queued',
      progress: 0,
      seconds: '8',
      aspect_ratio: '16:9',
      resolution: '720p',
      prompt: 'a lighthouse at dusk',
      error: null,
      url: null,
      thumbnail_url: null,
      completed_at: null,
      usage: { cost: 0, estimated_cost: 0.8 },
    });
    expect(created.created_at).toEqual(expect.any(Number));
    expect(generationId).toMatch(/^gen-/);
    // Spec 1 rule 7: the estimate (8 s at $0.10) is held, not yet charged.
    expect(heldAfterCreate).toMatchObject({ balance: before.balance, held: 0.8, open_holds: 1 });

    const running = seen.filter((s) => s.video.status === 'in_progress');
    expect(running.length).toBeGreaterThan(0);
    for (const { video } of running) {
      expect(video.progress).toBeGreaterThan(0);
      expect(video.progress).toBeLessThan(100);
    }
    // Progress never moves back, and the statuses come in the order of spec 3.1.
    const order = seen.map((s) => s.video.status).filter((s, i, all) => s !== all[i - 1]);
    expect(order).toEqual(order[0] === 'queued' ? ['queued', 'in_progress', 'completed'] : ['in_progress', 'completed']);
    const progress = seen.map((s) => s.video.progress);
    expect(progress).toEqual([...progress].sort((a, b) => a - b));

    // WIRE-FORMATS 2: while not final, when to ask again; none once final.
    for (const s of seen.filter((x) => !FINAL.includes(x.video.status))) {
      const ms = Number(s.pollAfterMs);
      expect(Number.isInteger(ms) && ms >= 1_000).toBe(true);
      expect(s.retryAfter).toBe(String(Math.ceil(ms / 1000)));
    }
    const last = seen.at(-1)!;
    expect([last.pollAfterMs, last.retryAfter]).toEqual([null, null]);
    const raw = await fetch(`${gw.url}/videos/${created.id}`, { headers: { authorization: `Bearer ${key}` } });
    expect([raw.status, ((await raw.json()) as Video).status]).toEqual([200, 'completed']);
    expect(raw.headers.get('openai-poll-after-ms')).toBeNull();
    expect(raw.headers.get('retry-after')).toBeNull();

    expect(final).toMatchObject({
      id: created.id,
      status: 'completed',
      progress: 100,
      error: null,
      // Signed URLs of the file (issue 41 item 5), usable without a key.
      url: expect.stringMatching(new RegExp(`/v1/videos/${created.id}/file\\?variant=video&`)),
      thumbnail_url: expect.stringMatching(new RegExp(`/v1/videos/${created.id}/file\\?variant=thumbnail&`)),
      completed_at: expect.any(Number),
    });
    // sim/video's upstream (OpenAI's API) reports no cost: billed at the catalog price, the estimate.
    expect(final.usage).toEqual({ cost: 0.8, estimated_cost: 0.8 });
  });

  it('4.15: the content is the MP4 and, with variant=thumbnail, the JPEG poster; `url` serves the same clip', async () => {
    const { key, created, final } = await completed;
    const sdk = sdkOf(key);
    const clip = await sdk.videos.downloadContent(created.id);
    expect(clip.headers.get('content-type')).toBe('video/mp4');
    const mp4 = Buffer.from(await clip.arrayBuffer());
    expect(mp4.subarray(4, 8).toString('latin1')).toBe('ftyp');
    expect(Number(clip.headers.get('content-length'))).toBe(mp4.length);

    const poster = await sdk.videos.downloadContent(created.id, { variant: 'thumbnail' });
    expect(poster.headers.get('content-type')).toBe('image/jpeg');
    const jpeg = Buffer.from(await poster.arrayBuffer());
    expect([jpeg[0], jpeg[1]]).toEqual([0xff, 0xd8]);

    const viaUrl = await fetch(final.url!, { headers: { authorization: `Bearer ${key}` } });
    expect(viaUrl.status).toBe(200);
    expect(Buffer.from(await viaUrl.arrayBuffer()).equals(mp4)).toBe(true);
    const viaThumbnailUrl = await fetch(final.thumbnail_url!, { headers: { authorization: `Bearer ${key}` } });
    expect(Buffer.from(await viaThumbnailUrl.arrayBuffer()).equals(jpeg)).toBe(true);
  });

  it('3.1 "billed": the balance moves by exactly usage.cost, nothing stays held, and the generation of the create shows that cost', async () => {
    const { key, before, final, generationId } = await completed;
    const after = await settledCredits(key);
    expect(nano(before.balance) - nano(after.balance)).toBe(nano(final.usage.cost));
    expect(after.held).toBe(0);
    const generation = await generationOf(call, key, generationId!);
    expect(generation).toMatchObject({ id: generationId, endpoint: '/v1/videos', status: 'completed', total_cost: final.usage.cost });
  });

  it('3.1 "billed actual provider cost": sim/video-router at 480p is charged what the router reported, less than the estimate', async () => {
    const models = await call('GET', '/models?type=video', { key: gw.keys.api_key });
    const router = models.json.data.find((m: any) => m.id === 'sim/video-router');
    expect(router.video.resolutions).toContain('480p');
    expect(router.pricing.second).toBe('0.3');

    const { key, before, created, final, generationId } = await routed480;
    expect(created).toMatchObject({ status: 'queued', resolution: '480p', aspect_ratio: '16:9', usage: { cost: 0, estimated_cost: 1.2 } });
    expect(final).toMatchObject({ status: 'completed', resolution: '480p' });
    // The router's price at 480p: $0.05 a second.
    expect(final.usage).toEqual({ cost: 0.2, estimated_cost: 1.2 });
    const after = await settledCredits(key);
    expect(nano(before.balance) - nano(after.balance)).toBe(nano(0.2));
    expect(after.held).toBe(0);
    expect((await generationOf(call, key, generationId!)).total_cost).toBe(0.2);
  });

  it('issue 41 item 15: a router-priced video is explained, its cost lines (the reported provider cost) adding up to its cost', async () => {
    const { key, generationId } = await routed480;
    await settledCredits(key);
    const generation = (await generationOf(call, key, generationId!)) as unknown as {
      total_cost: number;
      cost_lines: { amount: number }[];
      usage_by_meter: object;
    };
    expect(generation.cost_lines).toEqual([{ meter: 'provider_cost', quantity: 200_000_000, unit_price: 0.000000001, amount: 0.2 }]);
    expect(generation.usage_by_meter).toEqual({ provider_cost: 200_000_000 });
    const sum = generation.cost_lines.reduce((total, l) => total + nano(l.amount), 0n);
    expect(sum).toBe(nano(generation.total_cost));
  });

  it("4.15 `size`: sim/video-router takes size 854x480 as 16:9 at 480p, so the clip is made and billed at the router's 480p price", async () => {
    const { key, before, created, final } = await routedSize;
    expect(created).toMatchObject({ status: 'queued', size: '854x480', aspect_ratio: '16:9', resolution: '480p', usage: { estimated_cost: 1.2 } });
    expect([final.status, final.error]).toEqual(['completed', null]);
    expect(final.usage.cost).toBe(0.2);
    const after = await settledCredits(key);
    expect(nano(before.balance) - nano(after.balance)).toBe(nano(0.2));
  });

  it('4.15 `size`: sim/video takes size 1920x1080 as 16:9 at 1080p (a ratio and resolution it lists), so the clip is made, not failed upstream', async () => {
    const { key, before, created, final } = await sizedForOpenAi;
    expect(created).toMatchObject({ status: 'queued', size: '1920x1080', aspect_ratio: '16:9', resolution: '1080p', usage: { estimated_cost: 0.4 } });
    expect([final.status, final.error]).toEqual(['completed', null]);
    const after = await settledCredits(key);
    expect(nano(before.balance) - nano(after.balance)).toBe(nano(final.usage.cost));
  });

  it('3.1 "generation failed": failed with `error` set, not billed: the balance is back where it was, nothing held', async () => {
    const { key, before, final, seen } = await failed;
    expect(final).toMatchObject({
      status: 'failed',
      error: { code: 'video_generation_failed', message: expect.any(String) },
      url: null,
      thumbnail_url: null,
      usage: { cost: 0, estimated_cost: 0.4 },
    });
    expect(seen.some((s) => s.video.status === 'completed')).toBe(false);
    const after = await settledCredits(key);
    expect([after.balance, after.held, after.total_usage]).toEqual([before.balance, 0, before.total_usage]);
    const content = await sdkRefusal(sdkOf(key).videos.downloadContent(final.id));
    expect([content.status, (content.error as any).code]).toEqual([404, 'video_content_not_found']);
  });

  it('4.15 DELETE of a running video cancels it: content is 409 video_not_ready meanwhile, it ends `cancelled`, and it is free', async () => {
    const { key, before, created, final, whileRunning } = await cancelled;
    expect([whileRunning.content.status, (whileRunning.content.error as any)?.code]).toEqual([409, 'video_not_ready']);
    // A GET through fetch while it runs: when to ask again, in ms and in seconds.
    expect(whileRunning.get.status).toBe(200);
    expect(Number(whileRunning.get.pollAfterMs)).toBeGreaterThanOrEqual(1_000);
    expect(whileRunning.get.retryAfter).toBe(String(Math.ceil(Number(whileRunning.get.pollAfterMs) / 1000)));
    // The answer to DELETE is the video, still running until the worker has stopped it at the provider.
    expect(whileRunning.cancel.status).toBe(200);
    expect(whileRunning.cancel.json).toMatchObject({ id: created.id, object: 'video' });
    if (whileRunning.cancel.json.status !== 'cancelled') {
      expect(whileRunning.cancel.json.status).toBe('in_progress');
      expect(Number(whileRunning.cancel.pollAfterMs)).toBeGreaterThanOrEqual(1_000);
    }
    expect(final).toMatchObject({ id: created.id, status: 'cancelled', url: null, usage: { cost: 0, estimated_cost: 0.4 } });
    const after = await settledCredits(key);
    expect([after.balance, after.held, after.total_usage]).toEqual([before.balance, 0, before.total_usage]);
  });

  it('4.15 DELETE of an ended video deletes it: {id, object: "video.deleted", deleted: true}, then 404 video_not_found, content 404', async () => {
    const { key, created } = await cancelled;
    const sdk = sdkOf(key);
    expect(await sdk.videos.delete(created.id)).toEqual({ id: created.id, object: 'video.deleted', deleted: true });
    const gone = await sdkRefusal(sdk.videos.retrieve(created.id));
    expect([gone.status, (gone.error as any).code]).toEqual([404, 'video_not_found']);
    const content = await sdkRefusal(sdk.videos.downloadContent(created.id));
    expect([content.status, (content.error as any).code]).toEqual([404, 'video_not_found']);
    const again = await sdkRefusal(sdk.videos.delete(created.id));
    expect(again.status).toBe(404);
    expect((await sdk.videos.list()).data.map((v) => v.id)).not.toContain(created.id);
  });

  it('4.15 DELETE of a completed video removes it and its clip', async () => {
    const { key, created } = await completed;
    // Deleted once billed (a delete before the charge has a test of its own below).
    const billed = await settledCredits(key);
    const sdk = sdkOf(key);
    expect(await sdk.videos.delete(created.id)).toEqual({ id: created.id, object: 'video.deleted', deleted: true });
    const gone = await sdkRefusal(sdk.videos.retrieve(created.id));
    expect([gone.status, (gone.error as any).code]).toEqual([404, 'video_not_found']);
    for (const variant of ['video', 'thumbnail'] as const) {
      const content = await sdkRefusal(sdk.videos.downloadContent(created.id, { variant }));
      expect(content.status).toBe(404);
    }
    // Deleting is not a refund: the clip stays paid for.
    expect(await creditsOf(call, key)).toEqual(billed);
  });

  it('6.1: video.completed and video.failed arrive signed, with data.id the video and data.cost for the completed one', async () => {
    const [done, broke] = await hookedClips;
    expect([done.final.status, broke.final.status]).toEqual(['completed', 'failed']);
    const of = (id: string) => until(`the webhook of ${id}`, () => deliveries.find((d) => d.body.data.id === id), 15_000);
    const [completedEvent, failedEvent] = await Promise.all([of(done.final.id), of(broke.final.id)]);
    expect(completedEvent.body).toMatchObject({
      id: expect.any(String),
      type: 'video.completed',
      created: expect.any(Number),
      data: { id: done.final.id, status: 'completed', model: 'sim/video', cost: done.final.usage.cost },
    });
    expect(done.final.usage.cost).toBe(0.4);
    expect(failedEvent.body).toMatchObject({
      type: 'video.failed',
      data: { id: broke.final.id, status: 'failed', error: { code: 'video_generation_failed' } },
    });
    const now = Math.floor(Date.now() / 1000);
    for (const d of [completedEvent, failedEvent]) {
      expect(verifyWebhookSignature(d.headers['svc-signature'] as string, secret, d.raw, now)).toBe(true);
      expect(verifyWebhookSignature(d.headers['svc-signature'] as string, 'whsec_wrong', d.raw, now)).toBe(false);
    }
  });

  it(
    '3.1 "billed": a charge that fails once after the end is recorded (as when the worker dies there) is made on the retry',
    async () => {
      const { before, final, after } = await chargeRetried;
      expect(final.status).toBe('completed');
      expect([after.open_holds, after.held]).toEqual([0, 0]);
      expect(nano(before.balance) - nano(after.balance)).toBe(nano(final.usage.cost));
    },
    LEASE_MS + 15_000,
  );

  it(
    '3.1 "billed" + 4.15 "DELETE deletes": a completed video deleted before its charge landed is still charged, and its hold does not linger',
    async () => {
      const { before, final, heldAtDelete, deleted, after } = await deletedBeforeCharge;
      expect(final.status).toBe('completed');
      // The premise: the end is recorded, the charge not yet (the worker tries again once its lease runs out).
      expect([heldAtDelete.open_holds, heldAtDelete.held]).toEqual([1, final.usage.estimated_cost]);
      expect(deleted).toEqual({ id: final.id, object: 'video.deleted', deleted: true });
      expect([after.open_holds, after.held]).toEqual([0, 0]);
      expect(nano(before.balance) - nano(after.balance)).toBe(nano(final.usage.cost));
    },
    LEASE_MS + 15_000,
  );

  it('4.15 bad input: each a 400 naming the field, and nothing is held, billed or created', async () => {
    const { key } = await accountWithKey(gw, 10);
    const sdk = sdkOf(key);
    const before = await creditsOf(call, key);
    const activityBefore = (await call('GET', '/activity', { key })).json;
    const create = (body: Record<string, unknown>) => sdkRefusal(sdk.videos.create({ model: 'sim/video', prompt: 'a cat', ...body } as never));
    const cases: [string, Record<string, unknown>, string, string?][] = [
      ['seconds the model does not make', { seconds: '5' }, 'seconds'],
      ['image_url over http', { image_url: 'http://example.com/frame.png' }, 'image_url'],
      ['image_url on a loopback address', { image_url: 'https://127.0.0.1/x.png' }, 'image_url'],
      ['image_url on localhost', { image_url: 'https://localhost/x.png' }, 'image_url'],
      ['a chat model', { model: 'sim/echo' }, 'model'],
      ['an unknown form field', { style: 'noir' }, 'style', 'unknown_parameter'],
      [
        "OpenAI's input_reference upload",
        { input_reference: await toFile(Buffer.from([0xff, 0xd8, 0xff, 0xd9]), 'frame.jpg', { type: 'image/jpeg' }) },
        'input_reference',
      ],
      [
        'input_reference as {image_url} (the SDK sends it as a bracketed form field)',
        { input_reference: { image_url: 'https://example.com/frame.png' } },
        'input_reference[image_url]',
        'unknown_parameter',
      ],
      ['an empty prompt', { prompt: '' }, 'prompt'],
      ['a blank prompt', { prompt: '   ' }, 'prompt'],
      ['aspect_ratio and size together', { aspect_ratio: '16:9', size: '1280x720' }, 'size'],
      ['a resolution the model lacks', { resolution: '480p' }, 'resolution'],
    ];
    for (const [what, body, param, code] of cases) {
      const err = await create(body);
      expect({
        what,
        status: err.status,
        type: (err.error as any)?.type,
        param: (err.error as any)?.param,
        ...(code ? { code: (err.error as any)?.code } : {}),
      }).toEqual({
        what,
        status: 400,
        type: 'invalid_request_error',
        param,
        ...(code ? { code } : {}),
      });
    }
    // The same over JSON (spec 4.15 `seconds` a number).
    const json = await call('POST', '/videos', { key, body: { model: 'sim/video', prompt: 'a cat', seconds: 5 } });
    expect([json.status, json.json.error?.param]).toEqual([400, 'seconds']);
    const jsonReference = await call('POST', '/videos', {
      key,
      body: { model: 'sim/video', prompt: 'a cat', input_reference: { image_url: 'https://example.com/frame.png' } },
    });
    expect([jsonReference.status, jsonReference.json.error?.param]).toEqual([400, 'input_reference']);

    expect(await creditsOf(call, key)).toEqual(before);
    expect((await call('GET', '/activity', { key })).json).toEqual(activityBefore);
    expect((await sdk.videos.list()).data).toEqual([]);
  });

  it('4.15 content: variant=spritesheet is a 400 naming `variant`; an unknown video is 404 video_not_found', async () => {
    const { key, created } = await failed;
    const sdk = sdkOf(key);
    const sprites = await sdkRefusal(sdk.videos.downloadContent(created.id, { variant: 'spritesheet' }));
    expect([sprites.status, (sprites.error as any).param]).toEqual([400, 'variant']);
    const unknown = await sdkRefusal(sdk.videos.retrieve('video_000000000000000000000000'));
    expect([unknown.status, (unknown.error as any).code]).toEqual([404, 'video_not_found']);
    // Another workspace's video is as unknown as a missing one.
    const other = await sdkRefusal(sdkOf(gw.keys.api_key).videos.retrieve(created.id));
    expect([other.status, (other.error as any).code]).toEqual([404, 'video_not_found']);
  });

  it("4.15 list: the workspace's videos newest first, paged by cursor (`limit`, `after`, `has_more`)", async () => {
    const { key } = await accountWithKey(gw, 10);
    const sdk = sdkOf(key);
    // Failing clips: free, and they end by themselves.
    const ids: string[] = [];
    for (const n of [1, 2, 3]) ids.push((await sdk.videos.create({ model: 'sim/video', prompt: `clip ${n}\n#sim {"fail": true}` } as never)).id);
    const newestFirst = [...ids].reverse();

    const first = await sdk.videos.list({ limit: 2 });
    expect(first.data.map((v) => v.id)).toEqual(newestFirst.slice(0, 2));
    expect(first.has_more).toBe(true);
    expect(first.hasNextPage()).toBe(true);
    const second = await first.getNextPage();
    expect(second.data.map((v) => v.id)).toEqual(newestFirst.slice(2));
    expect(second.has_more).toBe(false);

    const all: string[] = [];
    for await (const video of sdk.videos.list({ limit: 1 })) all.push(video.id);
    expect(all).toEqual(newestFirst);

    const raw = await call('GET', `/videos?limit=2&after=${ids[2]}`, { key });
    expect(raw.json).toMatchObject({ object: 'list', first_id: ids[1], last_id: ids[0], has_more: false });
    expect(raw.json.data.map((v: Video) => v.id)).toEqual([ids[1], ids[0]]);
    expect((await call('GET', '/videos?order=asc', { key })).json.data.map((v: Video) => v.id)).toEqual(ids);
    expect((await call('GET', '/videos?limit=0', { key })).json.error.param).toBe('limit');
    expect((await call('GET', '/videos?after=nope', { key })).json.error.param).toBe('after');
    // Only this workspace's.
    const others = (await sdkOf(gw.keys.api_key).videos.list()).data.map((v) => v.id);
    expect(others.filter((id) => ids.includes(id))).toEqual([]);
  });
});
