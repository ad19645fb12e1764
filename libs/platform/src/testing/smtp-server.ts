import type { AddressInfo } from 'node:net';
import { simpleParser, type AddressObject, type ParsedMail } from 'mailparser';
import { SMTPServer } from 'smtp-server';

export interface TestSmtpServer {
  /** `smtp://127.0.0.1:<port>`, ready for SVC_SMTP_URL / `smtpUrl`. */
  url: string;
  /** Every message received so far, in order of arrival, whether or not waitFor returned it. */
  messages: ParsedMail[];
  /**
   * The oldest message addressed (To header, case-insensitive) to `to` that no earlier waitFor
   * has returned, waiting for it to arrive if need be. Each message is handed out once, so a
   * test expecting two codes at one address calls waitFor twice and gets them in order.
   * Rejects after `timeoutMs` (5 s by default).
   */
  waitFor(to: string, timeoutMs?: number): Promise<ParsedMail>;
  close(): Promise<void>;
}

function recipients(mail: ParsedMail): string[] {
  const to: AddressObject[] = mail.to === undefined ? [] : Array.isArray(mail.to) ? mail.to : [mail.to];
  return to.flatMap((group) =>
    group.value.flatMap(function flatten(a): string[] {
      return [...(a.address ? [a.address.toLowerCase()] : []), ...(a.group ?? []).flatMap(flatten)];
    }),
  );
}

/**
 * A real SMTP server in the test process, on a free loopback port: what the mailer sends goes
 * over a socket and through an SMTP session exactly as with a relay, and the test reads it back
 * parsed. Plain text only (STARTTLS is not offered) and any login, or none, is accepted.
 */
export async function startSmtpServer(): Promise<TestSmtpServer> {
  const messages: ParsedMail[] = [];
  const handedOut = new Set<ParsedMail>();
  const waiters: Array<{ to: string; resolve: (mail: ParsedMail) => void }> = [];

  const take = (to: string): ParsedMail | undefined => {
    const mail = messages.find((m) => !handedOut.has(m) && recipients(m).includes(to));
    if (mail) handedOut.add(mail);
    return mail;
  };

  const server = new SMTPServer({
    authOptional: true,
    allowInsecureAuth: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    // Connections still open when a test ends must not hold close() for smtp-server's 30 s.
    closeTimeout: 1_000,
    onAuth(auth, _session, callback) {
      callback(null, { user: auth.username });
    },
    onData(stream, _session, callback) {
      simpleParser(stream).then(
        (mail) => {
          messages.push(mail);
          for (const waiter of [...waiters]) {
            const found = take(waiter.to);
            if (found) {
              waiters.splice(waiters.indexOf(waiter), 1);
              waiter.resolve(found);
            }
          }
          callback();
        },
        (err: Error) => callback(err),
      );
    },
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.server.address() as AddressInfo;

  return {
    url: `smtp://127.0.0.1:${port}`,
    messages,
    waitFor(address, timeoutMs = 5_000) {
      const to = address.toLowerCase();
      const found = take(to);
      if (found) return Promise.resolve(found);
      return new Promise<ParsedMail>((resolve, reject) => {
        const waiter = {
          to,
          resolve: (mail: ParsedMail) => {
            clearTimeout(timer);
            resolve(mail);
          },
        };
        const timer = setTimeout(() => {
          waiters.splice(waiters.indexOf(waiter), 1);
          const seen = messages.map((m) => recipients(m).join(',')).join('; ') || 'none';
          reject(new Error(`no mail to ${address} within ${timeoutMs} ms (received so far, to: ${seen})`));
        }, timeoutMs);
        waiters.push(waiter);
      });
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
