import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Agent } from 'undici';
import { AggregateStore, SqlEventStore } from '@svc/eventstore';
import {
  accountDecider,
  accountStream,
  decideForwarded,
  decodeBatch,
  decideOnAccount,
  PEER_LEDGER_PATH,
  PeerUnavailableError,
  type PeerGateway,
  type WireAnswer,
} from '@svc/ledger';
import { placeHold, stats } from '@svc/ledger/testing/account-fixtures';
import { DomainError, isConnectionFailure, ManualClock, type SqlRunner } from '@svc/platform';
import { freshPgRunner } from '@svc/platform/testing/pg';
import { PeerLedger, type PeerLedgerOutcome } from './peer-ledger';
import { PeerRouting, rendezvousScore } from './peer-routing';

/** How the stand-in for the owner's route treats a batch: decides it, turns it away unread, or drops the connection once it has it. */
type Mode = 'decide' | 'turn-away' | 'drop';

/**
 * Issue 45, SVC_PEER_FORWARDING=on (or ledger): PeerLedger hands a contended account's commands to its
 * owner over HTTP. The owner here is a real HTTP server deciding with the owner's own function
 * (decideForwarded) on the same PostgreSQL store; the route's authentication is the gateway's,
 * tested end to end in test/e2e/peer-ledger.e2e.ts.
 */
describe('PeerLedger (issue 45: a contended account’s commands decided by its owner)', () => {
  let sql: SqlRunner;
  let store: SqlEventStore;
  let owner: AggregateStore;
  let here: AggregateStore;
  let server: Server;
  let url: string;
  let mode: Mode = 'decide';
  let batches: number[] = [];
  const agent = new Agent({ keepAliveTimeout: 5_000 });
  const clock = new ManualClock(new Date());

  beforeAll(async () => {
    sql = await freshPgRunner('peerledger');
    store = new SqlEventStore(sql);
    await store.init();
    owner = new AggregateStore(store, clock);
    here = new AggregateStore(store, clock);
    server = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (c: Buffer) => chunks.push(c));
      request.on('end', () => {
        if (request.url !== PEER_LEDGER_PATH) return response.writeHead(404).end();
        if (mode === 'drop') return request.socket.destroy();
        if (mode === 'turn-away') return response.writeHead(401, { 'content-type': 'application/json' }).end('{"error":{}}');
        const commands = decodeBatch(JSON.parse(Buffer.concat(chunks).toString()))!;
        batches.push(commands.length);
        void decideForwarded(owner, commands, () => undefined).then((outcomes) => {
          const answer: WireAnswer = { outcomes, shared: [] };
          response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer));
        });
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    await agent.close();
    await new Promise((resolve) => server.close(resolve));
    await store.close();
    await sql.close();
  });

  beforeEach(() => {
    mode = 'decide';
    batches = [];
  });

  /** A gateway `gw-self` whose peer `gw-owner` (at `at`) owns a fresh, funded account it has lost two races on. */
  async function given(at = url) {
    const peers: PeerGateway[] = [
      { id: 'gw-self', url: 'http://127.0.0.1:1', tokenHash: '' },
      { id: 'gw-owner', url: at, tokenHash: '' },
    ];
    let account = `acct_${Math.random().toString(36).slice(2)}`;
    while (rendezvousScore('gw-owner', account) < rendezvousScore('gw-self', account)) account = `acct_${Math.random().toString(36).slice(2)}`;
    await here.handle(accountDecider, accountStream(account), { type: 'OpenAccount', accountId: account });
    await here.handle(accountDecider, accountStream(account), { type: 'AddCredits', amountNano: 1_000_000_000n, reason: 'test' });
    const routing = new PeerRouting('gw-self', () => peers, clock);
    for (let i = 0; i < 2; i++) routing.noteLostRace(accountStream(account));
    const counted: Record<PeerLedgerOutcome, number> = { forwarded: 0, unreachable: 0, lost: 0 };
    const ledger = new PeerLedger(
      { id: 'gw-self', token: 'token' },
      routing,
      agent,
      clock,
      (c) => decideOnAccount(here, c.accountId, c.command, c.metadata, () => undefined),
      (outcome, n) => (counted[outcome] += n),
    );
    return { account, routing, ledger, counted };
  }

  it('sends 64 holds placed at once in a few batches, each answered with its own events, decided once each', async () => {
    const { account, ledger, counted } = await given();
    const answers = await Promise.all(Array.from({ length: 64 }, (_, i) => ledger.forward(account, placeHold(`h${i}`, 1_000_000n), { actor: 'test' })!));
    expect(answers.map((a) => (a.events[0].data as { hold_id: string }).hold_id)).toEqual(Array.from({ length: 64 }, (_, i) => `h${i}`));
    expect(answers.every((a) => a.appended !== null && typeof a.appended.nextRevision === 'bigint')).toBe(true);
    expect(batches.reduce((a, b) => a + b, 0)).toBe(64);
    // Two on their way at once; the rest waited and left together.
    expect(batches.length).toBeLessThanOrEqual(4);
    expect(counted).toEqual({ forwarded: 64, unreachable: 0, lost: 0 });
    const { state } = await here.handle(accountDecider, accountStream(account), { type: 'ExpireHolds' });
    expect(state.holds.size).toBe(64);
  });

  it('gives back the owner’s refusal as the domain error it was, money in it intact', async () => {
    const { account, ledger } = await given();
    const charge = ledger.forward(account, { type: 'ChargeUsage', holdId: 'never-held', amountNano: 5n, stats: stats() }, {})!;
    await expect(charge).rejects.toMatchObject({ code: 'hold_not_open' });
    const tooMuch = ledger.forward(account, placeHold('big', 2_000_000_000n), {})!;
    const refusal = (await tooMuch.catch((err: unknown) => err)) as DomainError;
    expect(refusal).toBeInstanceOf(DomainError);
    expect([refusal.code, refusal.details]).toEqual(['insufficient_quota', { available_nano: 1_000_000_000n, required_nano: 2_000_000_000n }]);
  });

  it('decides here what an owner turned away unread, and passes that owner over', async () => {
    const { account, routing, ledger, counted } = await given();
    mode = 'turn-away';
    const answer = await ledger.forward(account, placeHold('h-turned', 1_000n), {})!;
    expect(answer.events[0].type).toBe('HoldPlaced');
    expect(counted).toEqual({ forwarded: 0, unreachable: 1, lost: 0 });
    expect(routing.peerFor(account)).toBeNull();
  });

  it('decides here what could not reach an owner that refuses connections', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const at = `http://127.0.0.1:${(closed.address() as AddressInfo).port}`;
    await new Promise((resolve) => closed.close(resolve));
    const { account, ledger, counted } = await given(at);
    const answer = await ledger.forward(account, placeHold('h-refused', 1_000n), {})!;
    expect(answer.events[0].type).toBe('HoldPlaced');
    expect(counted.unreachable).toBe(1);
  });

  it('fails a batch lost once sent as a lost connection, fate unknown, and passes that owner over', async () => {
    const { account, routing, ledger, counted } = await given();
    mode = 'drop';
    const lost = (await ledger.forward(account, placeHold('h-lost', 1_000n), {})!.catch((err: unknown) => err)) as Error;
    expect(lost).toBeInstanceOf(PeerUnavailableError);
    expect(isConnectionFailure(lost)).toBe(true);
    expect(counted).toEqual({ forwarded: 0, unreachable: 0, lost: 1 });
    expect(routing.peerFor(account)).toBeNull();
  });

  it('decides here, saying nothing to anyone, an account nobody races', async () => {
    const { ledger } = await given();
    expect(ledger.forward('acct_quiet', placeHold('h-quiet', 1_000n), {})).toBeNull();
    expect(batches).toEqual([]);
  });
});
