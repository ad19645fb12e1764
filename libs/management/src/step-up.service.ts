import { Inject, Injectable, type OnApplicationShutdown } from '@nestjs/common';
import { randomBytes, randomInt } from 'node:crypto';
import { AGGREGATE_STORE, AggregateStore, DomainError, type EventMetadata } from '@svc/eventstore';
import {
  STEP_UP_ACTIONS,
  STEP_UP_CODE,
  STEP_UP_CODE_TTL_MS,
  stepUpCodeHmac,
  stepUpCodeKey,
  stepUpDecider,
  stepUpStream,
  type StepUpAction,
  getAccountSettings,
} from '@svc/identity';
import { CLOCK, CONFIG, createMailer, jsonObjectOf, READ_DB, type Clock, type Config, type Mailer, type SqlRunner } from '@svc/platform';

/** The request header that carries a code (spec 1). */
export const STEP_UP_HEADER = 'x-svc-step-up-code';

const WHAT: Record<StepUpAction, string> = {
  create_key: 'creating an API key',
  rotate_key: 'rotating an API key',
  grant_management: 'granting the management scope to a key',
  save_webhook: 'saving the webhook endpoint',
  save_provider_key: 'saving a provider key',
  delete_organization: 'deleting an organization',
  change_step_up: 'changing the email step-up setting',
};

/** `o***@example.com`: enough to tell which address, not enough to harvest it. */
export function maskEmail(email: string): string {
  const [local, domain] = email.split('@');
  return `${local.slice(0, 1)}***@${domain}`;
}

const forbidden = (code: string | null, message: string) => DomainError.forbidden(message, code);

/**
 * Email step-up (spec 1, 8): codes mailed on request, and the check each sensitive action makes
 * before it changes anything. With step-up off, the check passes and costs one read.
 */
@Injectable()
export class StepUpService implements OnApplicationShutdown {
  private mailer: Mailer | null = null;
  /** The HMAC key of stored codes (issue 41 S2), derived from SVC_ENCRYPTION_KEY; null without it. */
  private readonly codeKey: Buffer | null;

  constructor(
    @Inject(READ_DB) private readonly sql: SqlRunner,
    @Inject(CONFIG) private readonly config: Pick<Config, 'smtpUrl' | 'mailFrom' | 'dataDir' | 'encryptionKey'>,
    @Inject(CLOCK) private readonly clock: Clock,
    @Inject(AGGREGATE_STORE) private readonly aggregates: AggregateStore,
  ) {
    this.codeKey = config.encryptionKey ? stepUpCodeKey(config.encryptionKey) : null;
  }

  /** POST /v1/step-up/codes: a new code for `action`, mailed to the account's step-up address. */
  async sendCode(accountId: string, action: StepUpAction, metadata: EventMetadata): Promise<{ action: StepUpAction; sent_to: string; expires_at: string }> {
    const { stepUp } = await getAccountSettings(this.sql, accountId);
    if (!stepUp.enabled || !stepUp.email)
      throw DomainError.invalid('Email step-up is off for this account: no action needs a code.', 'action', 'step_up_not_enabled');
    // A code is stored only under the server's secret: a bare hash of 6 digits is reversed in a second.
    if (!this.codeKey) {
      throw new DomainError(
        'step_up_unavailable',
        'Confirmation codes cannot be issued: the gateway has no SVC_ENCRYPTION_KEY to protect them with. Ask the operator to set it.',
        {},
        'unavailable',
      );
    }
    const code = String(randomInt(0, 1_000_000)).padStart(6, '0');
    const salt = randomBytes(16).toString('hex');
    const codeId = `suc_${randomBytes(12).toString('hex')}`;
    await this.aggregates
      .handle(
        stepUpDecider,
        stepUpStream(accountId),
        { type: 'IssueStepUpCode', accountId, action, codeId, salt, codeHash: stepUpCodeHmac(this.codeKey, salt, code) },
        metadata,
      )
      .catch((err: unknown) => {
        if (err instanceof DomainError && err.code === 'step_up_rate_limited') {
          const retryAfter = Math.max(1, Math.ceil(Number(err.details.retry_after_ms) / 1000));
          throw new DomainError(err.code, err.message, { retryAfterSeconds: retryAfter }, 'rate_limited');
        }
        throw err;
      });
    await this.mail().send({
      to: stepUp.email,
      // Not the code: subjects show in notifications and in the development mailbox's log line.
      subject: 'Your svc-gateway confirmation code',
      text:
        `Your confirmation code for ${WHAT[action]} is ${code}.\n\n` +
        `It works once, for that action only, for ${STEP_UP_CODE_TTL_MS / 60_000} minutes. Send it in the X-Svc-Step-Up-Code header.\n\n` +
        'If you did not ask for it, someone holding a management key of your account did: revoke that key.\n',
    });
    return { action, sent_to: maskEmail(stepUp.email), expires_at: new Date(this.clock.now().getTime() + STEP_UP_CODE_TTL_MS).toISOString() };
  }

  /**
   * Passes when step-up is off; otherwise uses up the code in the request's header for
   * `action`, or refuses with 403 (`step_up_required`, `step_up_invalid`, `step_up_expired`).
   * Call it after the request is known to be valid and before anything changes.
   */
  async require(accountId: string, action: StepUpAction, headers: Record<string, string | string[] | undefined>, metadata: EventMetadata): Promise<void> {
    const header = headers[STEP_UP_HEADER];
    if (header !== undefined && (Array.isArray(header) || !STEP_UP_CODE.test(header))) {
      throw DomainError.invalid('X-Svc-Step-Up-Code must be the 6-digit code from the email, sent once.', 'X-Svc-Step-Up-Code');
    }
    const { stepUp } = await getAccountSettings(this.sql, accountId);
    if (!stepUp.enabled) return;
    if (header === undefined) {
      throw forbidden(
        'step_up_required',
        `This account requires email step-up for ${WHAT[action]}: POST /v1/step-up/codes with {"action": "${action}"}, then send the emailed code in X-Svc-Step-Up-Code.`,
      );
    }
    const { events } = await this.aggregates
      .handle(stepUpDecider, stepUpStream(accountId), { type: 'UseStepUpCode', accountId, action, code: header, codeKey: this.codeKey }, metadata)
      .catch((err: unknown) => {
        throw err instanceof DomainError ? forbidden(err.code, err.message) : err;
      });
    if (events[0]?.type !== 'StepUpCodeUsed') throw forbidden('step_up_invalid', `The confirmation code is wrong for ${WHAT[action]}.`);
  }

  async onApplicationShutdown(): Promise<void> {
    await this.mailer?.close();
  }

  private mail(): Mailer {
    this.mailer ??= createMailer(this.config);
    return this.mailer;
  }
}

export function parseStepUpCodeRequest(body: unknown): StepUpAction {
  const { action } = jsonObjectOf(body, '', ['action']);
  if (typeof action !== 'string' || !(STEP_UP_ACTIONS as readonly string[]).includes(action)) {
    throw DomainError.invalid(`action must be one of ${STEP_UP_ACTIONS.join(', ')}.`, 'action');
  }
  return action as StepUpAction;
}
