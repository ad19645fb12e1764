import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Client } from 'pg';
import { AggregateStore, SqlEventStore } from '@svc/eventstore';
import { accountDecider, accountStream } from '@svc/ledger';
import { PgSqlRunner, systemClock } from '@svc/platform';
import { ProjectionRunner } from '@svc/projections';
import { ALL_PROJECTIONS } from '@svc/runtime';
import { freshPgSchemaUrl } from '../support/gateway';

const WORKER = join(__dirname, '..', '..', 'dist', 'apps', 'worker', 'src', 'main.js');

const ROUNDS = 10;
const ACCOUNTS = 40;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Issue 14.4, as a process: the production worker died of a connection PostgreSQL dropped while
 * the worker had it checked out, and with it projections and hold expiry stopped for good. Here
 * every connection of a running worker is terminated, again and again while it applies events
 * (so some die inside its transactions and its LISTEN session dies too): it must live on and its
 * projections catch up with everything appended meanwhile.
 */
describe('a worker process whose PostgreSQL connections are terminated under it', () => {
  let worker: ChildProcess | undefined;
  let output = '';
  afterAll(() => {
    worker?.removeAllListeners('exit');
    worker?.kill('SIGKILL');
  });

  it('lives on, and its projections catch up with what was appended meanwhile', async () => {
    if (!existsSync(WORKER)) throw new Error('dist is missing: `npm test` builds it first (npm run build)');
    const url = new URL(await freshPgSchemaUrl('workerconn'));
    // Its sessions, and only they, are told apart by their application name.
    const name = `svc-worker-${randomBytes(4).toString('hex')}`;
    const workerUrl = new URL(url);
    workerUrl.searchParams.set('application_name', name);

    const env: NodeJS.ProcessEnv = { ...process.env, DATABASE_URL: workerUrl.toString() };
    delete env.EVENTSTORE_URL;
    delete env.REDIS_URL;
    const child = spawn(process.execPath, [WORKER], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    worker = child;
    let exited: string | null = null;
    child.on('exit', (code, signal) => (exited = `exit ${code ?? signal}`));
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`worker did not start:\n${output}`)), 30_000);
      const onData = (chunk: Buffer) => {
        output += chunk.toString();
        if (output.includes('svc-worker running')) {
          clearTimeout(timer);
          resolve();
        }
      };
      child.stdout!.on('data', onData);
      child.stderr!.on('data', onData);
      child.once('exit', () => reject(new Error(`worker exited at start:\n${output}`)));
    });

    const sql = await PgSqlRunner.connect({ connectionString: url.toString(), max: 4 });
    const store = new SqlEventStore(sql);
    const killer = new Client({ connectionString: url.toString() });
    await killer.connect();
    let killed = 0;
    const killWorkerSessions = async () => {
      const { rows } = await killer.query<{ ok: boolean }>('SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity WHERE application_name = $1', [name]);
      killed += rows.length;
    };
    try {
      const aggregates = new AggregateStore(store, systemClock);
      for (let round = 0; round < ROUNDS; round++) {
        // Accounts opened and credited one after the other, each a wake-up and a batch for the
        // worker, while its sessions are terminated every few milliseconds.
        let writing = true;
        const writes = (async () => {
          for (let i = 0; i < ACCOUNTS; i++) {
            const id = `acc_${round}_${i}_${randomBytes(3).toString('hex')}`;
            await aggregates.handle(accountDecider, accountStream(id), { type: 'OpenAccount', accountId: id });
            await aggregates.handle(accountDecider, accountStream(id), { type: 'AddCredits', amountNano: 1_000n, reason: 'test' });
          }
        })().finally(() => (writing = false));
        while (writing) {
          await sleep(2 + Math.random() * 10);
          await killWorkerSessions();
        }
        await writes;
        await sleep(150);
        expect({ exited, output: exited ? output : '' }).toEqual({ exited: null, output: '' });
      }
      expect(killed).toBeGreaterThanOrEqual(ROUNDS);

      const runner = new ProjectionRunner(sql, store, ALL_PROJECTIONS);
      const deadline = Date.now() + 30_000;
      for (;;) {
        const status = await runner.status();
        if (status.every((s) => s.lag === 0 && s.quarantined === 0)) break;
        if (Date.now() > deadline) throw new Error(`the worker's projections did not catch up: ${JSON.stringify(status)}\n${output}`);
        await sleep(200);
      }
      const { rows } = await sql.query<{ n: number }>('SELECT count(*)::int AS n FROM events');
      expect(rows[0].n).toBe(ROUNDS * ACCOUNTS * 2);
      expect({ exited, output: exited ? output : '' }).toEqual({ exited: null, output: '' });
    } finally {
      await killer.end();
      await store.close();
      await sql.close();
    }
  }, 90_000);
});
