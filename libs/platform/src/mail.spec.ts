import { mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { simpleParser, type AddressObject } from 'mailparser';
import { createMailer, type Mailer } from './mail';
import { startSmtpServer, type TestSmtpServer } from './testing/smtp-server';

const FROM = 'Acme Gateway <no-reply@acme.example>';
const CODE_TEXT = 'Your sign-in code is 493027. It expires in 10 minutes.';

function addresses(header: AddressObject | AddressObject[] | undefined): string[] {
  const groups = header === undefined ? [] : Array.isArray(header) ? header : [header];
  return groups.flatMap((g) => g.value.map((a) => a.address ?? ''));
}

/** A port nothing listens on: bound, read, and released again. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe('createMailer with an SMTP URL', () => {
  let smtp: TestSmtpServer;
  let mailer: Mailer;

  beforeAll(async () => {
    smtp = await startSmtpServer();
  });
  afterAll(async () => {
    await smtp.close();
  });
  afterEach(async () => {
    await mailer?.close();
  });

  it('delivers the message over SMTP with the configured From and the given To, Subject and text', async () => {
    mailer = createMailer({ smtpUrl: smtp.url, mailFrom: FROM, dataDir: '/nonexistent' }, () => {
      throw new Error('the SMTP mailer does not log');
    });
    const { messageId } = await mailer.send({ to: 'ops@example.com', subject: 'Your code', text: CODE_TEXT });

    const mail = await smtp.waitFor('ops@example.com');
    expect(mail.from?.value).toEqual([{ name: 'Acme Gateway', address: 'no-reply@acme.example' }]);
    expect(addresses(mail.to)).toEqual(['ops@example.com']);
    expect(mail.subject).toBe('Your code');
    expect(mail.text?.trim()).toBe(CODE_TEXT);
    expect(mail.messageId).toBe(messageId);
  });

  it('logs in with the credentials of the URL and sends message after message', async () => {
    const url = smtp.url.replace('smtp://', 'smtp://apikey:s%40cret@');
    mailer = createMailer({ smtpUrl: url, mailFrom: FROM, dataDir: '/nonexistent' });
    await mailer.send({ to: 'a@example.com', subject: 'one', text: 'first' });
    await mailer.send({ to: 'A@Example.com', subject: 'two', text: 'second' });

    expect((await smtp.waitFor('a@example.com')).subject).toBe('one');
    expect((await smtp.waitFor('a@example.com')).subject).toBe('two');
    await expect(smtp.waitFor('a@example.com', 200)).rejects.toThrow(/no mail to a@example.com within 200 ms/);
  });

  it('refuses to send once closed', async () => {
    mailer = createMailer({ smtpUrl: smtp.url, mailFrom: FROM, dataDir: '/nonexistent' });
    await mailer.close();
    await expect(mailer.send({ to: 'ops@example.com', subject: 's', text: 't' })).rejects.toThrow(/closed/);
  });
});

describe('createMailer with an SMTP server that is not there', () => {
  it('rejects at once when nothing listens on the port', async () => {
    const mailer = createMailer({ smtpUrl: `smtp://127.0.0.1:${await closedPort()}`, mailFrom: FROM, dataDir: '/nonexistent' });
    const started = Date.now();
    await expect(mailer.send({ to: 'ops@example.com', subject: 's', text: 't' })).rejects.toThrow(/ECONNREFUSED/);
    expect(Date.now() - started).toBeLessThan(3_000);
    await mailer.close();
  });

  it('rejects within seconds, not minutes, when the server accepts the connection and never speaks', async () => {
    const sockets = new Set<Socket>();
    const silent: Server = createServer((socket) => {
      sockets.add(socket);
      socket.on('error', () => undefined);
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = silent.address() as AddressInfo;
      const mailer = createMailer({ smtpUrl: `smtp://127.0.0.1:${port}`, mailFrom: FROM, dataDir: '/nonexistent' });
      const started = Date.now();
      await expect(mailer.send({ to: 'ops@example.com', subject: 's', text: 't' })).rejects.toThrow(/greeting/i);
      expect(Date.now() - started).toBeLessThan(8_000);
      await mailer.close();
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => silent.close(() => resolve()));
    }
  }, 15_000);
});

describe('createMailer without an SMTP URL (the development mailbox)', () => {
  let dataDir: string;
  let lines: string[];
  let mailer: Mailer;

  beforeEach(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'svc-mail-'));
    lines = [];
    mailer = createMailer({ smtpUrl: null, mailFrom: FROM, dataDir }, (line) => lines.push(line));
  });
  afterEach(async () => {
    await mailer.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  it('writes each message as one RFC 5322 .eml file in <dataDir>/mail/, created on first use', async () => {
    const first = await mailer.send({ to: 'ops@example.com', subject: 'Your code', text: CODE_TEXT });
    const second = await mailer.send({ to: 'dev@example.com', subject: 'Another', text: 'second body' });

    const files = (await readdir(join(dataDir, 'mail'))).sort();
    expect(files).toHaveLength(2);
    for (const f of files) expect(f).toMatch(/^\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d\.\d{3}Z-[0-9a-f]{12}\.eml$/);

    const parsed = await Promise.all(files.map(async (f) => simpleParser(await readFile(join(dataDir, 'mail', f)))));
    // Names sort by time, so the mailbox lists in the order the messages were sent.
    expect(parsed.map((m) => m.messageId)).toEqual([first.messageId, second.messageId]);
    expect(parsed[0].from?.value).toEqual([{ name: 'Acme Gateway', address: 'no-reply@acme.example' }]);
    expect(addresses(parsed[0].to)).toEqual(['ops@example.com']);
    expect(parsed[0].subject).toBe('Your code');
    expect(parsed[0].text?.trim()).toBe(CODE_TEXT);
    expect(parsed[0].date).toBeInstanceOf(Date);
    expect(addresses(parsed[1].to)).toEqual(['dev@example.com']);
    expect(parsed[1].text?.trim()).toBe('second body');

    expect((await stat(join(dataDir, 'mail', files[0]))).mode & 0o077).toBe(0);
  });

  it('logs one line per message naming the recipient, the subject and the file, never the body', async () => {
    await mailer.send({ to: 'ops@example.com', subject: 'Your code', text: CODE_TEXT });

    const [file] = await readdir(join(dataDir, 'mail'));
    expect(lines).toEqual([`mail to ops@example.com ("Your code") saved to ${join(dataDir, 'mail', file)}`]);
    expect(lines[0]).not.toContain('493027');
  });

  it('keeps messages sent in the same instant apart', async () => {
    await Promise.all(Array.from({ length: 20 }, (_, i) => mailer.send({ to: `u${i}@example.com`, subject: 's', text: `${i}` })));
    expect(await readdir(join(dataDir, 'mail'))).toHaveLength(20);
    expect(lines).toHaveLength(20);
  });
});
