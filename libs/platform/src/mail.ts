import { randomBytes } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Config } from './config';

export interface MailMessage {
  to: string;
  subject: string;
  text: string;
}

export interface Mailer {
  send(message: MailMessage): Promise<{ messageId: string }>;
  close(): Promise<void>;
}

// Required when a mailer is made: 700 kB of code that a process sending no mail (the CLI) never needs.
const nodemailer = () => require('nodemailer') as typeof import('nodemailer');

/**
 * Bounds on every stage of an SMTP session. Nodemailer's own defaults (2 minutes to connect,
 * 10 minutes of silence) would hold the request that asked for a code open long after its
 * caller gave up; with these a relay that is down or stuck fails the send in seconds.
 * A query string on SVC_SMTP_URL (`?connectionTimeout=20000`) still overrides them.
 */
const SMTP_TIMEOUTS = {
  connectionTimeout: 5_000,
  greetingTimeout: 5_000,
  dnsTimeout: 5_000,
  socketTimeout: 10_000,
};

/**
 * The one way the services send mail. With an SMTP URL every message goes to that relay;
 * without one it lands in the development mailbox, `<dataDir>/mail/`, so a developer can sign
 * in (read the code) with no mail server, and what is there is exactly what a relay would
 * have been handed.
 */
export function createMailer(config: Pick<Config, 'smtpUrl' | 'mailFrom' | 'dataDir'>, log: (line: string) => void = console.log): Mailer {
  return config.smtpUrl === null ? mailboxMailer(config.dataDir, config.mailFrom, log) : smtpMailer(config.smtpUrl, config.mailFrom);
}

/**
 * Not pooled: the mail sent here is one-time codes and notices, a few a minute at most, so a
 * connection per message costs nothing that matters, and there is never an idle pooled
 * connection that the relay has already dropped to fail the next send.
 *
 * TLS: `smtps:` is TLS from the first byte; `smtp:` upgrades with STARTTLS whenever the relay
 * offers it and stays plain when it does not, which a relay on localhost (or the tests' server)
 * needs. To refuse plain text on `smtp:`, add `?requireTLS=true` to the URL.
 */
function smtpMailer(url: string, from: string): Mailer {
  const transport = nodemailer().createTransport({ url, ...SMTP_TIMEOUTS }, { from });
  let closed = false;
  return {
    async send(message) {
      if (closed) throw new Error('the mailer is closed');
      const info = await transport.sendMail({ to: message.to, subject: message.subject, text: message.text });
      return { messageId: info.messageId };
    },
    async close() {
      closed = true;
      transport.close();
    },
  };
}

/**
 * Messages are rendered by the same composer that feeds the relay, so an .eml file opens in any
 * mail client and parses like delivered mail. Files are readable by the owner only and the log
 * line never carries the body: bodies hold sign-in codes.
 */
function mailboxMailer(dataDir: string, from: string, log: (line: string) => void): Mailer {
  const dir = join(dataDir, 'mail');
  const transport = nodemailer().createTransport({ streamTransport: true, buffer: true }, { from });
  let closed = false;
  return {
    async send(message) {
      if (closed) throw new Error('the mailer is closed');
      const info = await transport.sendMail({ to: message.to, subject: message.subject, text: message.text });
      await mkdir(dir, { recursive: true, mode: 0o700 });
      // Time first so `ls` lists the mailbox in order; the random part keeps two messages of the
      // same millisecond apart, and `wx` makes sure nothing is ever overwritten.
      const file = join(dir, `${new Date().toISOString().replace(/:/g, '-')}-${randomBytes(6).toString('hex')}.eml`);
      await writeFile(file, info.message as Buffer, { flag: 'wx', mode: 0o600 });
      log(`mail to ${message.to} (${JSON.stringify(message.subject)}) saved to ${file}`);
      return { messageId: info.messageId };
    },
    async close() {
      closed = true;
    },
  };
}
