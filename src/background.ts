import type { INestApplicationContext } from '@nestjs/common';
import { CommandBus } from '@nestjs/cqrs';
import { CATALOG_NOTICES_STREAM, catalogNoticesDecider, deprecationNoticesDue } from '@svc/catalog';
import { PromptLogs, StoredResponses } from '@svc/conversations';
import { createOutputFile, readJsonl, SqlFileStore } from '@svc/files';
import { activeBatches, batchDecider, BatchLineCalls, BatchLines, BatchRunner, batchStream, type BatchEndpoint, type BatchEvent } from '@svc/batches';
import {
  type ClaimedVideo,
  VideoCalls,
  videoDecider,
  VideoJobs,
  videoRunner as createVideoRunner,
  type VideoRunner,
  videoStream,
  type VideoEvent,
  type VideoTarget,
} from '@svc/videos';
import { ATTR, type Tracing } from '@svc/telemetry';
import { HoldExpirySweeper, HoldReaper, LedgerCommand, accountsWithExpiredHolds, forgetProgress, orphanedHolds, pruneInFlight } from '@svc/ledger';
import { randomBytes } from 'node:crypto';
import {
  KEY_EXPIRY_NOTICE_DAYS,
  keyDecider,
  keyStream,
  settingsDecider,
  settingsStream,
  webhookSecretContext,
  getAccountSettings,
  keysExpiringBy,
} from '@svc/identity';
import { createMailer, openSecret, OutboundClient, PeriodicTask, SecretDecryptionError, type IdleBackoff, type Mailer } from '@svc/platform';
import {
  noticesToMail,
  outboxEvent,
  deliveryDecider,
  NoticeMailer,
  webhookDispatcher as createWebhookDispatcher,
  webhookEventStream,
  type DeliveryEvent,
  type WebhookDispatcher,
} from '@svc/webhooks';
import { JobQueue } from '@svc/jobs';
import type { Runtime } from '@svc/runtime';

/** The hold expiry sweeper, wired to the command bus and the credits read model. */
export function holdExpirySweeper(runtime: Runtime, app: INestApplicationContext, intervalMs?: number, reaper?: HoldReaper): HoldExpirySweeper {
  const commands = app.get(CommandBus);
  return new HoldExpirySweeper(
    {
      // What can be charged is charged before the rest expires (issue 41 A): an expiry never bills.
      dueAccounts: async (now) => {
        await reaper?.reapOnce();
        return accountsWithExpiredHolds(runtime.sql, now);
      },
      expire: async (accountId) => {
        const { events } = await commands.execute(new LedgerCommand(accountId, { type: 'ExpireHolds' }, { actor: 'hold-expiry' }));
        return events.filter((e) => e.type === 'HoldExpired').length;
      },
      clock: runtime.clock,
    },
    intervalMs,
  );
}

/** The reaper of dead gateways' holds, wired like the sweeper. */
export function holdReaper(runtime: Runtime, app: INestApplicationContext, intervalMs?: number): HoldReaper {
  const commands = app.get(CommandBus);
  return new HoldReaper(
    {
      orphans: () => orphanedHolds(runtime.sql),
      execute: async (accountId, command) => void (await commands.execute(new LedgerCommand(accountId, command, { actor: 'hold-reaper' }))),
      forget: (holdId) => forgetProgress(runtime.sql, holdId),
      prune: () => pruneInFlight(runtime.sql),
    },
    intervalMs,
  );
}

/**
 * Records the catalog's due `model.deprecated` notices (spec 6.1, 9) on the catalog-notices
 * stream; resolves with how many were new. Several workers may run it: the stream's expected
 * revision makes each notice land once.
 */
export async function recordDeprecationNotices(runtime: Runtime): Promise<number> {
  const due = deprecationNoticesDue(runtime.catalog, runtime.clock.now());
  if (due.length === 0) return 0;
  const { events } = await runtime.aggregates.handle(
    catalogNoticesDecider,
    CATALOG_NOTICES_STREAM,
    { type: 'RecordDeprecationNotices', due },
    { actor: 'catalog' },
  );
  return events.length;
}

/**
 * Records the `key.expiring` notices due now (spec 6.1: 7 days and 1 day before a key's
 * expiry) on each key's stream; the key decider keeps each notice to once, however many
 * workers look. Resolves with how many were new.
 */
export async function recordKeyExpiryNotices(runtime: Runtime): Promise<number> {
  const now = runtime.clock.now();
  const horizon = new Date(now.getTime() + Math.max(...KEY_EXPIRY_NOTICE_DAYS) * 24 * 3600_000);
  let recorded = 0;
  for (const keyId of await keysExpiringBy(runtime.sql, now, horizon)) {
    const { events } = await runtime.aggregates.handle(keyDecider, keyStream(keyId), { type: 'NoteKeyExpiring' }, { actor: 'keys' });
    recorded += events.length;
  }
  return recorded;
}

/** How often due deprecation and expiry notices are looked for: a week's notice need not be to the second. */
const NOTICE_INTERVAL_MS = 10 * 60_000;

/**
 * Removes the stored responses (spec 3.3, 8) whose 30 days are over; resolves with how many.
 * Reads already hide them from the moment they expire: this pass deletes the content itself.
 */
export function purgeStoredResponses(runtime: Runtime): Promise<number> {
  return new StoredResponses(runtime.sql).purgeExpired(runtime.clock.now());
}

/** Removes the prompt logs (spec 1) whose retention is over; reads hide them from the moment they expire. */
export function purgePromptLogs(runtime: Runtime): Promise<number> {
  return new PromptLogs(runtime.sql).purgeExpired(runtime.clock.now());
}

/** Removes the expired files (spec 4.11) and the uploads never finished; reads hide an expired file from the moment it expires. */
export function purgeFiles(runtime: Runtime): Promise<number> {
  return new SqlFileStore(runtime.sql, () => null, runtime.clock).purgeExpired(runtime.clock.now());
}

/** How often expired stored responses, prompt logs and files are purged. */
const PURGE_INTERVAL_MS = 60 * 60_000;

/**
 * The webhook dispatcher (spec 6.1) on this process's read models and streams, POSTing through
 * the outbound guard: public https targets only unless SVC_WEBHOOK_ALLOW_PRIVATE says otherwise.
 */
export function webhookDispatcher(runtime: Runtime, client: Pick<OutboundClient, 'post'>): WebhookDispatcher {
  const metadata = { actor: 'webhooks' };
  return createWebhookDispatcher({
    clock: runtime.clock,
    queue: new JobQueue(runtime.sql),
    delivery: (eventId) => runtime.aggregates.load(deliveryDecider, webhookEventStream(eventId)),
    event: (eventId) => outboxEvent(runtime.sql, eventId),
    endpoint: async (accountId) => {
      const { webhook } = await getAccountSettings(runtime.sql, accountId);
      if (!webhook) return null;
      return { id: webhook.id, url: webhook.url, paused: webhook.paused, secret: openWebhookSecret(runtime, accountId, webhook.id, webhook.sealedSecret) };
    },
    post: (url, init) => client.post(url, init),
    record: async (command) =>
      (await runtime.aggregates.handle(deliveryDecider, webhookEventStream(command.eventId), command, metadata)).events as DeliveryEvent[],
    report: async (accountId, webhookId, eventId, delivered) =>
      void (await runtime.aggregates.handle(
        settingsDecider,
        settingsStream(accountId),
        { type: 'RecordWebhookDelivery', accountId, webhookId, eventId, delivered },
        metadata,
      )),
    owner: `worker-${process.pid}-${randomBytes(4).toString('hex')}`,
    warn: (message) => console.warn(message),
  });
}

/** How often batches are looked at; a line that ends starts the next one at once, without waiting for it. */
const BATCH_INTERVAL_MS = 500;

/**
 * The batch runner (spec 4.11) of this process: the batch and line workflows on the job table,
 * lines run through the app's pipeline (BatchLineCalls), under leases longer than an upstream
 * call may take.
 */
export function batchRunner(runtime: Runtime, app: INestApplicationContext): BatchRunner {
  const files = new SqlFileStore(runtime.sql, () => runtime.config.encryptionKey, runtime.clock);
  return new BatchRunner({
    clock: runtime.clock,
    queue: new JobQueue(runtime.sql),
    lines: new BatchLines(runtime.sql, () => runtime.config.encryptionKey),
    files: {
      input: async (batch) =>
        files.available && (await files.get(batch.workspaceId, batch.inputFileId)) ? readJsonl(files.content(batch.workspaceId, batch.inputFileId)) : null,
      write: async (batch, filename, lines) =>
        (await createOutputFile(files, { workspaceId: batch.workspaceId, accountId: batch.accountId, keyId: batch.keyId, filename }, lines)).id,
      remove: async (batch, fileId) => void (await files.delete(batch.workspaceId, fileId)),
    },
    calls: app.get(BatchLineCalls),
    active: async () => (await activeBatches(runtime.sql)).map((b) => ({ ...b, endpoint: b.endpoint as BatchEndpoint })),
    load: (batchId) => runtime.aggregates.load(batchDecider, batchStream(batchId)),
    decide: async (command) =>
      (await runtime.aggregates.handle(batchDecider, batchStream(command.batchId), command, { actor: 'batches', correlationId: command.batchId }))
        .events as BatchEvent[],
    owner: `worker-${process.pid}-${randomBytes(4).toString('hex')}`,
    // A line ends within the upstream timeout (its settlement takes milliseconds): a lease past it is never cut short.
    leaseMs: runtime.config.upstreamTimeoutMs + 5_000,
    perAccount: runtime.config.batchConcurrency,
    // Each line attempt a trace: its hold, upstream and charge spans (the pipeline's) under one root.
    ...(runtime.tracing ? { trace: rootSpan(runtime.tracing) } : {}),
    warn: (message) => console.warn(message),
  });
}

/** How often due videos are looked for: polls are seconds apart (POLL_FLOOR_MS), a cancel is acted on within this. */
const VIDEO_INTERVAL_MS = 1_000;

/** Videos one worker moves at once: each step is a provider call or two. */
const VIDEO_CONCURRENCY = 16;

/**
 * The video runner (spec 4.15, 3.1) of this process: providers and billing through the app's
 * pipeline (VideoCalls); the clip and its poster kept as files of purpose `video`.
 */
export function videoRunner(runtime: Runtime, app: INestApplicationContext): VideoRunner {
  const calls = app.get(VideoCalls);
  const { tracing } = runtime;
  const files = new SqlFileStore(runtime.sql, () => runtime.config.encryptionKey, runtime.clock, ['video']);
  const metadata = (videoId: string) => ({ actor: 'videos', correlationId: videoId });
  return createVideoRunner({
    clock: runtime.clock,
    queue: new JobQueue(runtime.sql),
    jobs: new VideoJobs(runtime.sql, () => runtime.config.encryptionKey),
    load: (videoId) => runtime.aggregates.load(videoDecider, videoStream(videoId)),
    decide: async (command) =>
      (await runtime.aggregates.handle(videoDecider, videoStream(command.videoId), command, metadata(command.videoId))).events as VideoEvent[],
    targets: async (job) => (tracing ? (await calls.targets(job)).map((target) => tracedVideoTarget(tracing, job, target)) : calls.targets(job)),
    costOf: (job, provider, request, cost) => calls.costOf(job, provider, request, cost),
    // Their spans are the pipeline's, as a request's charge or release is.
    charge: (job, state) => calls.charge(job, state),
    release: (job, errorCode) => calls.release(job, errorCode),
    store: async (job, variant, content) => {
      const extension = variant === 'video' ? 'mp4' : (content.contentType.split('/')[1]?.split(';')[0] ?? 'jpeg');
      const meta = {
        workspaceId: job.workspaceId,
        accountId: job.accountId,
        keyId: job.keyId,
        filename: `${job.videoId}.${extension}`,
        purpose: 'video' as const,
      };
      return (
        await files.create(
          meta,
          (async function* () {
            yield content.bytes;
          })(),
        )
      ).id;
    },
    owner: `worker-${process.pid}-${randomBytes(4).toString('hex')}`,
    // A step is at most a submission to each provider, or a clip's and a poster's download.
    leaseMs: runtime.config.upstreamTimeoutMs * 3 + 5_000,
    concurrency: VIDEO_CONCURRENCY,
    warn: (message) => console.warn(message),
    // Each step of a job a trace: its provider calls and its charge or release under one root.
    ...(tracing ? { trace: (job, fn) => tracing.root('video step', { 'svc.video_id': job.key, 'svc.attempt': job.attempts }, fn) } : {}),
  });
}

/** Work outside a request, each run the root of a trace of its own. */
function rootSpan(tracing: Tracing) {
  return <T>(name: string, attributes: Record<string, string | number>, fn: () => Promise<T>) => tracing.root(name, attributes, fn);
}

/** The ids a video's spans carry, as a request's hold and charge spans do. */
function videoAttributes(job: ClaimedVideo): Record<string, string> {
  return { [ATTR.generationId]: job.reservation.id, [ATTR.accountId]: job.accountId, [ATTR.keyId]: job.keyId, [ATTR.endpoint]: job.reservation.endpoint };
}

/** A video provider whose every call is an upstream span (a submission, a poll, a download, a cancel). */
function tracedVideoTarget(tracing: Tracing, job: ClaimedVideo, target: VideoTarget): VideoTarget {
  const call = <T>(operation: string, fn: () => Promise<T>) =>
    tracing.upstream(
      `upstream ${target.provider}`,
      { ...videoAttributes(job), [ATTR.provider]: target.provider, [ATTR.operation]: 'video', 'svc.video_call': operation },
      fn,
    );
  return {
    provider: target.provider,
    upstreamModel: target.upstreamModel,
    createVideo: (body) => call('create', () => target.createVideo(body)),
    getVideo: (id) => call('poll', () => target.getVideo(id)),
    cancelVideo: (id) => call('cancel', () => target.cancelVideo(id)),
    videoContent: (id, variant) => call(`download_${variant}`, () => target.videoContent(id, variant)),
  };
}

/** Notices (spec 9) mailed to the account's step-up address, the one address the service holds. */
export function noticeMailer(runtime: Runtime, mailer: Pick<Mailer, 'send'>): NoticeMailer {
  return new NoticeMailer({
    sql: runtime.sql,
    clock: runtime.clock,
    mailer,
    pending: (staleBefore, limit) => noticesToMail(runtime.sql, staleBefore, limit),
    addressOf: async (accountId) => (await getAccountSettings(runtime.sql, accountId)).stepUp.email,
  });
}

function openWebhookSecret(runtime: Runtime, accountId: string, webhookId: string, sealed: string): string | null {
  const key = runtime.config.encryptionKey;
  if (key === null) return null;
  try {
    return openSecret(key, sealed, webhookSecretContext(accountId, webhookId));
  } catch (err) {
    if (err instanceof SecretDecryptionError) return null;
    throw err;
  }
}

/** How often due webhook events are looked for: the first attempt follows its event within about a second. */
const WEBHOOK_INTERVAL_MS = 1000;

/**
 * The longest wait between an idle process's looks at its queues. Work comes with an append,
 * which brings the wait back to the pass's interval; a retry scheduled for later keeps its job
 * in the queue, and so keeps the passes at their interval until it is due.
 */
const IDLE_POLL_MS = 5_000;

/** Backs off while `busy` says a pass found nothing to do, now or later; the log's appends wake it. */
function idleBackoff<T>(runtime: Runtime, busy: IdleBackoff<T>['busy']): IdleBackoff<T> {
  return { idleMs: IDLE_POLL_MS, busy, wake: (listener) => runtime.store.watchAppends(() => listener()) };
}

/** A pass of a workflow processor found work when it claimed a job, or when its kind has jobs due later. */
function queuedWork(runtime: Runtime, kind: string): IdleBackoff<number>['busy'] {
  const queue = new JobQueue(runtime.sql);
  return (claimed) => claimed > 0 || queue.hasAny(kind);
}

export interface Background {
  sweeper: HoldExpirySweeper;
  reaper: HoldReaper;
  recordDeprecationNotices(): Promise<number>;
  recordKeyExpiryNotices(): Promise<number>;
  /** One purge pass of expired stored responses, as the background runs it every hour. */
  purgeStoredResponses(): Promise<number>;
  /** One purge pass of expired prompt logs, as the background runs it every hour. */
  purgePromptLogs(): Promise<number>;
  /** One purge pass of expired files and unfinished uploads, as the background runs it every hour. */
  purgeFiles(): Promise<number>;
  webhooks: WebhookDispatcher;
  notices: NoticeMailer;
  batches: BatchRunner;
  videos: VideoRunner;
  stop(): Promise<void>;
}

/** Projections and sweepers: what the worker runs, and `npm start` beside the gateway. */
export function startBackground(runtime: Runtime, app: INestApplicationContext): Background {
  runtime.projections.start();
  const reaper = holdReaper(runtime, app);
  reaper.start();
  const sweeper = holdExpirySweeper(runtime, app, undefined, reaper);
  sweeper.start();
  const notices = new PeriodicTask(() => recordDeprecationNotices(runtime), NOTICE_INTERVAL_MS);
  notices.start((err) => console.error('recording model deprecation notices failed:', err), { immediately: true });
  const expiries = new PeriodicTask(() => recordKeyExpiryNotices(runtime), NOTICE_INTERVAL_MS);
  expiries.start((err) => console.error('recording key expiry notices failed:', err), { immediately: true });
  const purge = new PeriodicTask(() => Promise.all([purgeStoredResponses(runtime), purgePromptLogs(runtime), purgeFiles(runtime)]), PURGE_INTERVAL_MS);
  purge.start((err) => console.error('purging expired stored responses, prompt logs or files failed:', err), { immediately: true });
  const outbound = new OutboundClient({ allowPrivate: runtime.config.webhookAllowPrivate });
  const webhooks = webhookDispatcher(runtime, outbound);
  const deliveries = new PeriodicTask(() => webhooks.runOnce(), WEBHOOK_INTERVAL_MS, idleBackoff(runtime, queuedWork(runtime, webhooks.workflow.kind)));
  deliveries.start((err) => console.error('delivering webhooks failed:', err));
  const batches = batchRunner(runtime, app);
  const batching = new PeriodicTask(
    () => batches.runOnce(),
    BATCH_INTERVAL_MS,
    idleBackoff(runtime, (underWay) => underWay > 0),
  );
  batching.start((err) => console.error('running batches failed:', err));
  const videos = videoRunner(runtime, app);
  const filming = new PeriodicTask(() => videos.runOnce(), VIDEO_INTERVAL_MS, idleBackoff(runtime, queuedWork(runtime, videos.workflow.kind)));
  filming.start((err) => console.error('running videos failed:', err));
  const mailer = createMailer(runtime.config);
  const noticeMail = noticeMailer(runtime, mailer);
  // A notice to mail comes from the log (a projection), and a stale claim is ten minutes old.
  const mailing = new PeriodicTask(
    () => noticeMail.runOnce(),
    WEBHOOK_INTERVAL_MS,
    idleBackoff(runtime, (sent) => sent > 0),
  );
  mailing.start((err) => console.error('mailing notices failed:', err));
  return {
    sweeper,
    reaper,
    recordDeprecationNotices: () => recordDeprecationNotices(runtime),
    recordKeyExpiryNotices: () => recordKeyExpiryNotices(runtime),
    purgeStoredResponses: () => purgeStoredResponses(runtime),
    purgePromptLogs: () => purgePromptLogs(runtime),
    purgeFiles: () => purgeFiles(runtime),
    webhooks,
    notices: noticeMail,
    batches,
    videos,
    stop: async () => {
      await batching.stop();
      await batches.stop();
      await filming.stop();
      await videos.stop();
      await deliveries.stop();
      await mailing.stop();
      await mailer.close();
      await outbound.close();
      await purge.stop();
      await notices.stop();
      await expiries.stop();
      await sweeper.stop();
      await reaper.stop();
      await runtime.projections.stop();
    },
  };
}
