/**
 * Notices by email (spec 9: accounts that used a deprecated model get an email as well as the
 * in-app notice and the webhook). The notices are a projection of the log; which were mailed is
 * this table's business, kept apart so that a rebuilt projection does not mail them again.
 * A pass claims each notice before sending, so several workers send each once; a worker that
 * dies after its claim leaves the notice to another once the claim is stale.
 */
import { createSchema, type Clock, type Mailer, type SqlRunner } from '@svc/platform';

export const NOTICE_MAIL_TABLE = 'notice_mail';

/** Far longer than a send takes (the mailer's timeouts are seconds). */
const STALE_CLAIM_MS = 10 * 60_000;

export interface MailableNotice {
  id: string;
  accountId: string;
  title: string;
  message: string;
}

export interface NoticeMailerDeps {
  sql: SqlRunner;
  clock: Clock;
  mailer: Pick<Mailer, 'send'>;
  /** Notices with no mail row, or a stale claim. */
  pending(staleBefore: Date, limit: number): Promise<MailableNotice[]>;
  /** Where the account reads mail from us: its step-up address, the only one the service holds. */
  addressOf(accountId: string): Promise<string | null>;
}

export class NoticeMailer {
  constructor(private readonly deps: NoticeMailerDeps) {}

  static async init(sql: SqlRunner): Promise<void> {
    await createSchema(
      sql,
      `
      CREATE TABLE IF NOT EXISTS ${NOTICE_MAIL_TABLE} (
        notice_id text PRIMARY KEY,
        state text NOT NULL,
        claimed_at timestamptz NOT NULL,
        done_at timestamptz
      );
    `,
    );
  }

  /** One pass; resolves with how many notices were mailed. */
  async runOnce(): Promise<number> {
    const now = this.deps.clock.now();
    const stale = new Date(now.getTime() - STALE_CLAIM_MS);
    let sent = 0;
    for (const notice of await this.deps.pending(stale, 20)) {
      if (!(await this.claim(notice.id, now, stale))) continue;
      const address = await this.deps.addressOf(notice.accountId);
      if (address === null) {
        await this.finish(notice.id, 'no_address');
        continue;
      }
      try {
        await this.deps.mailer.send({ to: address, subject: notice.title, text: `${notice.message}\n` });
      } catch {
        // Given back: the next pass tries again.
        await this.deps.sql.query(`DELETE FROM ${NOTICE_MAIL_TABLE} WHERE notice_id = $1 AND state = 'claimed'`, [notice.id]);
        continue;
      }
      await this.finish(notice.id, 'sent');
      sent++;
    }
    return sent;
  }

  private async claim(noticeId: string, now: Date, stale: Date): Promise<boolean> {
    const { rows } = await this.deps.sql.query(
      `INSERT INTO ${NOTICE_MAIL_TABLE} (notice_id, state, claimed_at) VALUES ($1, 'claimed', $2)
       ON CONFLICT (notice_id) DO UPDATE SET claimed_at = EXCLUDED.claimed_at WHERE ${NOTICE_MAIL_TABLE}.state = 'claimed' AND ${NOTICE_MAIL_TABLE}.claimed_at < $3
       RETURNING notice_id`,
      [noticeId, now.toISOString(), stale.toISOString()],
    );
    return rows.length === 1;
  }

  private async finish(noticeId: string, state: 'sent' | 'no_address'): Promise<void> {
    await this.deps.sql.query(`UPDATE ${NOTICE_MAIL_TABLE} SET state = $2, done_at = $3 WHERE notice_id = $1`, [
      noticeId,
      state,
      this.deps.clock.now().toISOString(),
    ]);
  }
}
