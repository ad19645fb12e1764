import { Inject, Injectable } from '@nestjs/common';
import { CommandBus } from '@nestjs/cqrs';
import { randomBytes } from 'node:crypto';
import { AGGREGATE_STORE, AggregateStore, DomainError, type EventMetadata } from '@svc/eventstore';
import {
  SettingsCommandMessage,
  webhookSecretContext,
  type SettingsCommand,
  type SettingsEvent,
  getAccountSettings,
  type AccountSettingsRow,
} from '@svc/identity';
import {
  checkOutboundUrl,
  CLOCK,
  CONFIG,
  OutboundRefused,
  READ_DB,
  resolveOutboundTarget,
  sealSecret,
  type Clock,
  type Config,
  type SqlRunner,
} from '@svc/platform';
import { PROJECTIONS, type ProjectionRunner } from '@svc/projections';
import { getWebhookEvent, listWebhookEvents, type WebhookAttemptRow, type WebhookEventRow, deliveryDecider, webhookEventStream } from '@svc/webhooks';
import { PromptLogs, promptLogsUnavailable, type PromptLogSummary } from '@svc/conversations';
import type { SettingsPatch, WebhookRequest } from './settings.request';

/** `whsec_` and 32 random bytes, as Stripe's signing secrets look. */
const newWebhookSecret = () => `whsec_${randomBytes(32).toString('base64url')}`;
const newWebhookId = () => `wh_${randomBytes(12).toString('hex')}`;

/** What the API shows of an endpoint; never the secret, except once when it is made. */
export function presentWebhook(webhook: NonNullable<AccountSettingsRow['webhook']>) {
  return {
    id: webhook.id,
    url: webhook.url,
    events: webhook.events,
    paused: webhook.paused,
    consecutive_failures: webhook.consecutiveFailures,
    updated_at: webhook.savedAt,
  };
}

export function presentSettings(settings: AccountSettingsRow) {
  return {
    prompt_logging: { enabled: settings.promptLogging.enabled, retention_days: settings.promptLogging.retentionDays },
    step_up: { enabled: settings.stepUp.enabled, email: settings.stepUp.email },
    webhook: settings.webhook && presentWebhook(settings.webhook),
  };
}

/** A webhook event as GET /v1/webhook-events lists it: the envelope (spec 2.7) and its delivery state. */
export function presentWebhookEvent(event: WebhookEventRow, attempts?: WebhookAttemptRow[]) {
  return {
    id: event.id,
    type: event.type,
    created: Math.floor(new Date(event.created).getTime() / 1000),
    data: event.data,
    delivery: {
      state: event.state,
      attempts: event.attempts,
      next_attempt_at: event.nextAttemptAt,
      last_status_code: event.lastStatusCode,
      last_error: event.lastError,
    },
    ...(attempts && {
      attempts: attempts.map((a) => ({
        attempt: a.attempt,
        at: a.at,
        status_code: a.statusCode,
        latency_ms: a.latencyMs,
        error: a.error,
        delivered: a.delivered,
      })),
    }),
  };
}

/**
 * Account settings (spec 1, 6.1): prompt logging, email step-up and the webhook endpoint, each
 * write a command on `settings-<account>` (so in the audit log with actor, IP and time), read
 * back once the read model has it.
 */
@Injectable()
export class SettingsService {
  constructor(
    @Inject(READ_DB) private readonly sql: SqlRunner,
    @Inject(CONFIG) private readonly config: Pick<Config, 'encryptionKey' | 'webhookAllowPrivate'>,
    @Inject(CLOCK) private readonly clock: Clock,
    @Inject(PROJECTIONS) private readonly projections: Pick<ProjectionRunner, 'waitUntilVisible'>,
    @Inject(AGGREGATE_STORE) private readonly aggregates: AggregateStore,
    private readonly commands: CommandBus,
  ) {}

  async get(accountId: string): Promise<AccountSettingsRow> {
    return getAccountSettings(this.sql, accountId);
  }

  async update(accountId: string, patch: SettingsPatch, metadata: EventMetadata): Promise<AccountSettingsRow> {
    const current = await this.get(accountId);
    if (patch.promptLogging) {
      const { enabled = current.promptLogging.enabled, retentionDays = current.promptLogging.retentionDays } = patch.promptLogging;
      if (enabled && this.config.encryptionKey === null) throw promptLogsUnavailable();
      await this.execute(accountId, { type: 'SetPromptLogging', accountId, enabled, retentionDays }, metadata);
    }
    if (patch.stepUp) {
      const enabled = patch.stepUp.enabled ?? current.stepUp.enabled;
      const email = patch.stepUp.email === undefined ? current.stepUp.email : patch.stepUp.email;
      await this.execute(accountId, { type: 'SetStepUp', accountId, enabled, email }, metadata);
    }
    return this.get(accountId);
  }

  /**
   * Spec 6.1 and the outbound guard: `https` to a public address, checked here by resolving the
   * name, and again by the dispatcher at every connection (a name may resolve elsewhere later).
   */
  async saveWebhook(
    accountId: string,
    request: WebhookRequest,
    metadata: EventMetadata,
    /** Runs once the URL is known to be usable, before anything is written (email step-up). */
    authorize: () => Promise<void> = async () => undefined,
  ): Promise<{ webhook: AccountSettingsRow['webhook']; secret: string | null }> {
    const policy = { allowPrivate: this.config.webhookAllowPrivate };
    try {
      const url = checkOutboundUrl(request.url, policy);
      await resolveOutboundTarget(url, policy);
    } catch (err) {
      if (err instanceof OutboundRefused) throw DomainError.invalid(err.message, 'url', 'invalid_webhook_url');
      throw err;
    }
    await authorize();
    const current = await this.get(accountId);
    const webhookId = current.webhook?.id ?? newWebhookId();
    const secret = current.webhook ? null : newWebhookSecret();
    const events = await this.execute(
      accountId,
      {
        type: 'SaveWebhook',
        accountId,
        webhookId,
        url: request.url as string,
        events: request.events,
        encryptedSecret: secret === null ? '' : this.seal(accountId, webhookId, secret),
      },
      metadata,
    );
    // Shown only if it is the one recorded: a concurrent first save may have made the endpoint already.
    const recorded = events.some((e) => e.type === 'WebhookSaved' && e.data.encrypted_secret !== undefined);
    return { webhook: (await this.get(accountId)).webhook, secret: recorded ? secret : null };
  }

  async rotateWebhookSecret(accountId: string, metadata: EventMetadata): Promise<{ webhook: AccountSettingsRow['webhook']; secret: string }> {
    const webhook = (await this.get(accountId)).webhook;
    if (!webhook) throw webhookNotFound();
    const secret = newWebhookSecret();
    await this.execute(accountId, { type: 'RotateWebhookSecret', accountId, encryptedSecret: this.seal(accountId, webhook.id, secret) }, metadata);
    return { webhook: (await this.get(accountId)).webhook, secret };
  }

  async deleteWebhook(accountId: string, metadata: EventMetadata): Promise<void> {
    await this.execute(accountId, { type: 'DeleteWebhook', accountId }, metadata);
  }

  async resumeWebhook(accountId: string, metadata: EventMetadata): Promise<AccountSettingsRow['webhook']> {
    await this.execute(accountId, { type: 'ResumeWebhook', accountId }, metadata);
    return (await this.get(accountId)).webhook;
  }

  listEvents(accountId: string, limit: number, after: string | null): Promise<WebhookEventRow[]> {
    return listWebhookEvents(this.sql, accountId, limit, after);
  }

  async event(accountId: string, eventId: string): Promise<{ event: WebhookEventRow; attempts: WebhookAttemptRow[] }> {
    const found = await getWebhookEvent(this.sql, accountId, eventId);
    if (!found) throw DomainError.notFound(`No webhook event with id '${eventId}'.`, 'webhook_event_not_found', 'id');
    return found;
  }

  /** Spec 6.1: any event can be redelivered; the dispatcher makes one more attempt, listed with the others. */
  async redeliver(accountId: string, eventId: string, metadata: EventMetadata): Promise<{ event: WebhookEventRow; attempts: WebhookAttemptRow[] }> {
    await this.event(accountId, eventId);
    if (!(await this.get(accountId)).webhook) throw webhookNotFound();
    const handled = await this.aggregates.handle(deliveryDecider, webhookEventStream(eventId), { type: 'RequestRedelivery', eventId, accountId }, metadata);
    if (handled.appended) await this.projections.waitUntilVisible(handled.appended.position, ['notifications']);
    return this.event(accountId, eventId);
  }

  /** Spec 1: the account's prompt logs, newest first. */
  promptLogs(accountId: string, limit: number, after: string | null): Promise<PromptLogSummary[]> {
    return this.logs().list(accountId, this.clock.now(), limit, after);
  }

  async promptLog(accountId: string, generationId: string) {
    const found = await this.logs().find(accountId, generationId, this.clock.now());
    if (!found) throw DomainError.notFound(`No prompt log for generation '${generationId}'.`, 'prompt_log_not_found', 'generation_id');
    return found;
  }

  /** Purges one log, or all of them (`generationId` null): deleted for good, not hidden. */
  async purgePromptLogs(accountId: string, generationId: string | null): Promise<number> {
    const deleted = await this.logs().purge(accountId, generationId);
    if (generationId !== null && deleted === 0)
      throw DomainError.notFound(`No prompt log for generation '${generationId}'.`, 'prompt_log_not_found', 'generation_id');
    return deleted;
  }

  private logs(): PromptLogs {
    return new PromptLogs(this.sql, () => this.config.encryptionKey);
  }

  private seal(accountId: string, webhookId: string, secret: string): string {
    const key = this.config.encryptionKey;
    if (key === null) {
      throw new DomainError(
        'encryption_unavailable',
        'Webhooks are not available on this gateway: it has no SVC_ENCRYPTION_KEY to keep signing secrets.',
        {},
        'unavailable',
      );
    }
    return sealSecret(key, secret, webhookSecretContext(accountId, webhookId));
  }

  private async execute(accountId: string, command: SettingsCommand, metadata: EventMetadata): Promise<SettingsEvent[]> {
    const result = await this.commands.execute(new SettingsCommandMessage(accountId, command, metadata)).catch((err: unknown) => {
      if (err instanceof DomainError) {
        if (err.code === 'webhook_not_found') throw webhookNotFound();
        throw DomainError.invalid(err.message, (err.code !== null ? DOMAIN_ERROR_PARAMS[err.code] : undefined) ?? null, err.code);
      }
      throw err;
    });
    if (result.appended) await this.projections.waitUntilVisible(result.appended.position, ['account_settings', 'audit_log']);
    return result.events;
  }
}

/** The field a refused command is about, for the 400's `param`. */
const DOMAIN_ERROR_PARAMS: Record<string, string> = { invalid_retention_days: 'prompt_logging.retention_days', step_up_email_required: 'step_up.email' };

function webhookNotFound(): DomainError {
  return DomainError.notFound('No webhook endpoint is configured; PUT /v1/settings/webhook first.', 'webhook_not_found');
}
