/**
 * The contract every EventStore adapter must pass (ARCHITECTURE section 3). Adapter spec
 * files call `eventStoreContract` with a factory; the factory is called ONCE (beforeAll)
 * and tests stay independent by using unique stream names and by capturing the global
 * position before they append, so a store may hold data from earlier tests or runs.
 *
 * The factory's store must use the default size limit (DEFAULT_MAX_APPEND_BYTES).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import {
  AppendTooLargeError,
  DEFAULT_MAX_APPEND_BYTES,
  UnstorableEventError,
  WrongExpectedVersionError,
  type AppendResult,
  type EventStore,
  type ExpectedRevision,
  type NewEvent,
  type Position,
  type RecordedEvent,
  type Upcaster,
} from '../port';
import { START } from '../position';

export interface ContractFixture {
  store: EventStore;
  /**
   * Another store on the same data through its own connections (another pool, another
   * client), standing for a second process. Called at most once; `cleanup` closes it.
   */
  makeSecondStore?: () => Promise<EventStore>;
  /** A store on the same data that reads every event through `upcast`; `cleanup` closes it. */
  makeUpcastingStore: (upcast: Upcaster) => Promise<EventStore>;
  /** Closes the store(s) and whatever they run on. */
  cleanup: () => Promise<void>;
}

const CONCURRENT_WRITERS = 20;

export function eventStoreContract(name: string, create: () => Promise<ContractFixture>): void {
  describe(`EventStore contract: ${name}`, () => {
    let fixture: ContractFixture | undefined;
    let store: EventStore;
    /** The second store when the adapter has one, else the first: concurrent writers alternate. */
    let other: EventStore;

    beforeAll(async () => {
      fixture = await create();
      store = fixture.store;
      other = fixture.makeSecondStore ? await fixture.makeSecondStore() : store;
    });
    afterAll(async () => {
      await fixture?.cleanup();
    });

    const run = randomBytes(4).toString('hex');
    let counter = 0;
    /** A prefix no other test, run or process uses; streams of a test live under it. */
    const uniquePrefix = (label: string) => `ct${run}${++counter}${label}-`;
    const uniqueStream = (label = 'stream') => `${uniquePrefix(label)}s`;

    const event = (type = 'Tested', data: unknown = { n: 1 }, metadata?: NewEvent['metadata']): NewEvent => ({
      id: randomUUID(),
      type,
      data,
      ...(metadata ? { metadata } : {}),
    });
    const events = (count: number, type?: string) => Array.from({ length: count }, (_, i) => event(type, { i }));

    /** Everything readable after `after`, page by page. */
    async function readAllFrom(after: Position): Promise<RecordedEvent[]> {
      const out: RecordedEvent[] = [];
      for (let position = after; ;) {
        const page = await store.readAll({ after: position, maxCount: 500 });
        if (page.length === 0) return out;
        out.push(...page);
        position = page[page.length - 1].position;
      }
    }

    let knownHead: Position = START;
    /** The position of the last event readable now: later appends come after it. */
    async function head(): Promise<Position> {
      const newer = await readAllFrom(knownHead);
      if (newer.length > 0) knownHead = newer[newer.length - 1].position;
      return knownHead;
    }

    /**
     * Events of the streams under `prefix` after `after`, once at least `count` of them are
     * readable (or 5 s passed). On PostgreSQL an event becomes readable globally only when
     * every older transaction on the server has ended, so another session's open transaction
     * (another test process) may delay it briefly.
     */
    async function readAllUnder(prefix: string, after: Position, count: number): Promise<RecordedEvent[]> {
      const deadline = Date.now() + 5000;
      for (;;) {
        const mine = (await readAllFrom(after)).filter((e) => e.stream.startsWith(prefix));
        if (mine.length >= count || Date.now() > deadline) return mine;
        await sleep(20);
      }
    }

    async function expectConflict(attempt: Promise<unknown>, stream: string, expected: ExpectedRevision, actual: bigint): Promise<void> {
      const err = await attempt.then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(WrongExpectedVersionError);
      expect(err).toMatchObject({ stream, expected, actual });
    }

    const ids = (list: { id: string }[]) => list.map((e) => e.id);
    const revisions = (list: RecordedEvent[]) => list.map((e) => e.revision);

    describe('append and expected revision', () => {
      it('counts revisions from 0 and returns the position of the last event written', async () => {
        const stream = uniqueStream();
        const first = event();
        const r1 = await store.append(stream, [first], 'no_stream');
        expect(r1.nextRevision).toBe(0n);
        const more = events(2);
        const r2 = await store.append(stream, more, 0n);
        expect(r2.nextRevision).toBe(2n);

        const read = await store.readStream(stream);
        expect(ids(read)).toEqual(ids([first, ...more]));
        expect(revisions(read)).toEqual([0n, 1n, 2n]);
        expect(read.every((e) => typeof e.revision === 'bigint' && e.stream === stream)).toBe(true);
        expect(r1.position).toBe(read[0].position);
        expect(r2.position).toBe(read[2].position);
        expect(read[0].position < read[1].position && read[1].position < read[2].position).toBe(true);
      });

      // [expected, outcome on a missing stream, outcome on a stream at revision 1]:
      // a bigint is the nextRevision of a successful one-event append, 'conflict' a
      // WrongExpectedVersionError whose `actual` is -1n (missing) or 1n.
      const matrix: [ExpectedRevision, bigint | 'conflict', bigint | 'conflict'][] = [
        ['any', 0n, 2n],
        ['no_stream', 0n, 'conflict'],
        ['stream_exists', 'conflict', 2n],
        [0n, 'conflict', 'conflict'],
        [1n, 'conflict', 2n],
        [2n, 'conflict', 'conflict'],
      ];
      for (const [expected, onMissing, onExisting] of matrix) {
        for (const [label, setup, outcome] of [
          ['a missing stream', 0, onMissing],
          ['a stream at revision 1', 2, onExisting],
        ] as const) {
          it(`expected ${String(expected)} on ${label}: ${outcome === 'conflict' ? 'conflict' : 'appends'}`, async () => {
            const stream = uniqueStream();
            if (setup > 0) await store.append(stream, events(setup), 'no_stream');
            const before = await store.readStream(stream);
            const attempt = store.append(stream, [event()], expected);
            if (outcome === 'conflict') {
              await expectConflict(attempt, stream, expected, BigInt(setup) - 1n);
              expect(await store.readStream(stream)).toEqual(before);
            } else {
              expect((await attempt).nextRevision).toBe(outcome);
              expect(revisions(await store.readStream(stream))).toEqual(Array.from({ length: setup + 1 }, (_, i) => BigInt(i)));
            }
          });
        }
      }

      it('an empty append checks the expectation and returns the current state', async () => {
        const stream = uniqueStream();
        await expect(store.append(stream, [], 'no_stream')).resolves.toEqual({ nextRevision: -1n, position: START });
        await expectConflict(store.append(stream, [], 'stream_exists'), stream, 'stream_exists', -1n);
        const written = await store.append(stream, events(2), 'no_stream');
        await expect(store.append(stream, [], 1n)).resolves.toEqual(written);
        await expect(store.append(stream, [], 'any')).resolves.toEqual(written);
        await expectConflict(store.append(stream, [], 0n), stream, 0n, 1n);
        expect(await store.readStream(stream)).toHaveLength(2);
      });
    });

    describe('idempotent retry', () => {
      it('re-appending the same ids at the same place returns the original result and writes nothing', async () => {
        const prefix = uniquePrefix('retry');
        const stream = `${prefix}s`;
        const after = await head();
        const ab = events(2);
        const c = [event()];
        const first = await store.append(stream, ab, 'no_stream');
        const second = await store.append(stream, c, 1n);

        expect(await store.append(stream, ab, 'no_stream')).toEqual(first);
        expect(await store.append(stream, c, 1n)).toEqual(second);
        expect(await store.append(stream, ab, 'any')).toEqual(first);

        expect(ids(await store.readStream(stream))).toEqual(ids([...ab, ...c]));
        const global = await readAllUnder(prefix, after, 3);
        expect(ids(global)).toEqual(ids([...ab, ...c]));
      });

      it('different or partly different ids at a taken revision conflict', async () => {
        const stream = uniqueStream();
        const [a, b] = events(2);
        await store.append(stream, [a, b], 'no_stream');
        await expectConflict(store.append(stream, [event()], 0n), stream, 0n, 1n);
        await expectConflict(store.append(stream, [event()], 'no_stream'), stream, 'no_stream', 1n);
        await expectConflict(store.append(stream, [b, event()], 0n), stream, 0n, 1n);
        await expectConflict(store.append(stream, [a, b, event()], 'no_stream'), stream, 'no_stream', 1n);
        expect(ids(await store.readStream(stream))).toEqual([a.id, b.id]);
      });
    });

    describe('concurrent appends from separate connections', () => {
      const writer = (i: number) => (i % 2 === 0 ? store : other);

      it(`exactly one of ${CONCURRENT_WRITERS} appends expecting the same revision wins`, async () => {
        const stream = uniqueStream();
        await store.append(stream, [event()], 'no_stream');
        const attempts = await Promise.allSettled(Array.from({ length: CONCURRENT_WRITERS }, (_, i) => writer(i).append(stream, [event()], 0n)));
        const won = attempts.filter((a) => a.status === 'fulfilled');
        const lost = attempts.flatMap((a) => (a.status === 'rejected' ? [a.reason as unknown] : []));
        expect(won).toHaveLength(1);
        expect((won[0] as PromiseFulfilledResult<AppendResult>).value.nextRevision).toBe(1n);
        expect(lost).toHaveLength(CONCURRENT_WRITERS - 1);
        for (const err of lost) {
          expect(err).toBeInstanceOf(WrongExpectedVersionError);
          expect(err).toMatchObject({ stream, expected: 0n, actual: 1n });
        }
        expect(revisions(await store.readStream(stream))).toEqual([0n, 1n]);
      });

      it(`${CONCURRENT_WRITERS} writers that re-read on conflict each win one revision, without gaps or duplicates`, async () => {
        const prefix = uniquePrefix('race');
        const stream = `${prefix}s`;
        const after = await head();
        await store.append(stream, [event()], 'no_stream');
        let conflicts = 0;
        const written = await Promise.all(
          Array.from({ length: CONCURRENT_WRITERS }, async (_, i) => {
            const mine = event('Raced', { writer: i });
            for (;;) {
              const [last] = await writer(i).readStream(stream, { direction: 'backwards', maxCount: 1 });
              try {
                return { mine, result: await writer(i).append(stream, [mine], last.revision) };
              } catch (err) {
                if (!(err instanceof WrongExpectedVersionError)) throw err;
                conflicts++;
              }
            }
          }),
        );
        const read = await store.readStream(stream);
        expect(revisions(read)).toEqual(Array.from({ length: CONCURRENT_WRITERS + 1 }, (_, i) => BigInt(i)));
        expect(new Set(ids(read)).size).toBe(read.length);
        for (const { mine, result } of written) {
          const stored = read[Number(result.nextRevision)];
          expect(stored.id).toBe(mine.id);
          expect(stored.position).toBe(result.position);
        }
        expect(conflicts).toBeGreaterThan(0); // the writers really did race
        // Global order keeps each stream's revision order, however the commits interleaved.
        expect(revisions(await readAllUnder(prefix, after, read.length))).toEqual(revisions(read));
      });

      it(`${CONCURRENT_WRITERS} appends expecting 'any' all succeed with contiguous revisions`, async () => {
        const stream = uniqueStream();
        const batches = Array.from({ length: CONCURRENT_WRITERS }, () => events(2));
        const results = await Promise.all(batches.map((batch, i) => writer(i).append(stream, batch, 'any')));
        const read = await store.readStream(stream);
        expect(revisions(read)).toEqual(Array.from({ length: 2 * CONCURRENT_WRITERS }, (_, i) => BigInt(i)));
        batches.forEach((batch, i) => {
          const last = Number(results[i].nextRevision);
          expect([read[last - 1].id, read[last].id]).toEqual(ids(batch)); // a batch stays together
        });
      });
    });

    describe('readAll', () => {
      it('returns events in commit order, strictly after `after`, at most maxCount', async () => {
        const prefix = uniquePrefix('all');
        const after = await head();
        const [e1, e2, e3, e4] = events(4);
        await store.append(`${prefix}one`, [e1, e2], 'no_stream');
        await store.append(`${prefix}two`, [e3], 'no_stream');
        const last = await store.append(`${prefix}one`, [e4], 1n);

        const all = await readAllUnder(prefix, after, 4);
        expect(ids(all)).toEqual(ids([e1, e2, e3, e4]));
        expect(all.map((e) => e.stream)).toEqual([`${prefix}one`, `${prefix}one`, `${prefix}two`, `${prefix}one`]);
        expect(revisions(all)).toEqual([0n, 1n, 0n, 2n]);
        for (let i = 1; i < all.length; i++) expect(all[i - 1].position < all[i].position).toBe(true);
        expect(all[3].position).toBe(last.position);

        expect(ids((await store.readAll({ after: all[1].position })).slice(0, 2))).toEqual(ids([e3, e4]));
        expect(ids(await store.readAll({ after, maxCount: 2 }))).toEqual(ids([e1, e2]));
        expect(await store.readAll({ after, maxCount: 0 })).toEqual([]);
      });

      it('countEventsAfter counts what readAll would return', async () => {
        const prefix = uniquePrefix('count');
        const after = await head();
        await store.append(`${prefix}s`, events(3), 'no_stream');
        const mine = await readAllUnder(prefix, after, 3);
        expect(await store.countEventsAfter(mine[0].position)).toBe((await readAllFrom(mine[0].position)).length);
        expect(await store.countEventsAfter(after)).toBe((await readAllFrom(after)).length);
        expect(await store.countEventsAfter()).toBe((await readAllFrom(START)).length);
        expect(await store.countEventsAfter(after)).toBeGreaterThanOrEqual(3);
      });
    });

    describe('readStream', () => {
      it('reads by revision forwards and backwards, from a revision, at most maxCount', async () => {
        const stream = uniqueStream();
        await store.append(stream, events(12), 'no_stream'); // past 9: revisions sort as numbers
        const range = (from: number, to: number) => Array.from({ length: Math.abs(to - from) + 1 }, (_, i) => BigInt(from < to ? from + i : from - i));
        const read = async (options: Parameters<EventStore['readStream']>[1]) => revisions(await store.readStream(stream, options));
        expect(await read(undefined)).toEqual(range(0, 11));
        expect(await read({ direction: 'backwards' })).toEqual(range(11, 0));
        expect(await read({ fromRevision: 2n })).toEqual(range(2, 11));
        expect(await read({ fromRevision: 10n, direction: 'backwards' })).toEqual(range(10, 0));
        expect(await read({ maxCount: 2 })).toEqual([0n, 1n]);
        expect(await read({ maxCount: 3, direction: 'backwards' })).toEqual([11n, 10n, 9n]);
        expect(await read({ fromRevision: 9n, maxCount: 2 })).toEqual([9n, 10n]);
        expect(await read({ fromRevision: 12n })).toEqual([]);
      });

      it('reads a missing stream as []', async () => {
        const stream = uniqueStream('missing');
        expect(await store.readStream(stream)).toEqual([]);
        expect(await store.readStream(stream, { direction: 'backwards' })).toEqual([]);
        expect(await store.readStream(stream, { fromRevision: 3n })).toEqual([]);
      });
    });

    describe('append size limit', () => {
      it('refuses an append above the limit (counted in bytes) and writes nothing', async () => {
        const stream = uniqueStream();
        // 550,000 characters but 1,100,000 UTF-8 bytes: the limit is on bytes.
        const big = event('Big', { s: 'é'.repeat(550_000) });
        const err = await store.append(stream, [big], 'any').catch((e: unknown) => e);
        expect(err).toBeInstanceOf(AppendTooLargeError);
        expect(err).toMatchObject({ stream, limit: DEFAULT_MAX_APPEND_BYTES });
        expect((err as AppendTooLargeError).bytes).toBe(Buffer.byteLength('Big') + Buffer.byteLength(JSON.stringify(big.data)) + Buffer.byteLength('{}'));
        expect(await store.readStream(stream)).toEqual([]);
      });

      // Issue 14.2: PostgreSQL's jsonb refuses these; every adapter refuses them alike, before writing.
      it('refuses a NUL or an unpaired surrogate anywhere in an event, naming where, and writes none of the append', async () => {
        const stream = uniqueStream();
        for (const [bad, path] of [
          [{ data: { user: 'a\u0000b' } }, 'data.user'],
          [{ data: { list: ['ok', 'x\ud800'] } }, 'data.list[1]'],
          [{ data: {}, metadata: { user: '\udc00' } }, 'metadata.user'],
          // A high surrogate cut from its pair, as a truncation at a UTF-16 boundary leaves it.
          [{ data: { deep: [{ text: 'ok \ud83d\ude00 cut \ud83d' }] } }, 'data.deep[0].text'],
          // Keys too; the path names the object that holds the key.
          [{ data: { headers: { 'x\u0000y': 'v' } } }, 'data.headers'],
          [{ data: {}, metadata: { '\ud800': 'v' } }, 'metadata'],
        ] as const) {
          const err = await store
            .append(stream, [event('Fine'), { ...event('Bad', bad.data), ...('metadata' in bad ? { metadata: bad.metadata } : {}) }], 'any')
            .catch((e: unknown) => e);
          expect(err).toBeInstanceOf(UnstorableEventError);
          expect(err).toMatchObject({ stream, eventType: 'Bad', path });
        }
        expect(await store.readStream(stream)).toEqual([]);
        // A paired surrogate (an emoji) is fine, and so is text that only spells such an escape out.
        await store.append(stream, [event('Emoji', { s: 'ok \ud83d\ude00' })], 'no_stream');
        expect((await store.readStream(stream))[0].data).toEqual({ s: 'ok 😀' });
        const spelled = { s: 'C:\\u0000 \\ud800 \\uDC00' };
        await store.append(stream, [event('Spelled', spelled)], 0n);
        expect((await store.readStream(stream))[1].data).toEqual(spelled);
      });

      it('counts the whole append, not each event', async () => {
        const stream = uniqueStream();
        const third = () => event('Part', { s: 'x'.repeat(Math.ceil(DEFAULT_MAX_APPEND_BYTES / 3)) });
        await expect(store.append(stream, [third(), third(), third()], 'any')).rejects.toBeInstanceOf(AppendTooLargeError);
        expect(await store.readStream(stream)).toEqual([]);
        const one = await store.append(stream, [third()], 'no_stream');
        expect(one.nextRevision).toBe(0n);
      });
    });

    describe('subscribeToAll', () => {
      it('delivers history then live events in order, only those the filter selects, until stopped', async () => {
        const prefix = uniquePrefix('sub');
        const after = await head();
        const history = events(3);
        await store.append(`${prefix}a`, history.slice(0, 2), 'no_stream');
        await store.append(uniqueStream('elsewhere'), events(2), 'no_stream');
        await store.append(`${prefix}b`, history.slice(2), 'no_stream');

        const seen: RecordedEvent[] = [];
        const subscription = store.subscribeToAll({ after, filter: { streamPrefixes: [prefix] } }, (e) => {
          seen.push(e);
        });
        await waitFor(() => seen.length >= 3);
        const live = events(2);
        await store.append(`${prefix}a`, live, 1n);
        await waitFor(() => seen.length >= 5);
        await subscription.stop();
        expect(ids(seen)).toEqual(ids([...history, ...live]));
        expect(revisions(seen)).toEqual([0n, 1n, 0n, 2n, 3n]);
        for (let i = 1; i < seen.length; i++) expect(seen[i - 1].position < seen[i].position).toBe(true);

        await store.append(`${prefix}a`, [event()], 3n);
        await sleep(300);
        expect(seen).toHaveLength(5);
      });

      it('filters by event type, alone or together with stream prefixes', async () => {
        const prefix = uniquePrefix('types');
        const otherStream = uniqueStream('other');
        const after = await head();
        const [wanted, alsoWanted, otherWanted, last] = [event('Wanted'), event('AlsoWanted'), event('Wanted'), event('Wanted')];
        await store.append(`${prefix}a`, [wanted, event('Unwanted'), event('WantedNot')], 'no_stream');
        await store.append(otherStream, [otherWanted], 'no_stream');
        await store.append(`${prefix}b`, [alsoWanted], 'no_stream');
        await store.append(`${prefix}c`, [last], 'no_stream');

        const types = ['Wanted', 'AlsoWanted'];
        const byType: RecordedEvent[] = [];
        const both: RecordedEvent[] = [];
        const s1 = store.subscribeToAll({ after, filter: { eventTypes: types } }, (e) => {
          byType.push(e);
        });
        const s2 = store.subscribeToAll({ after, filter: { streamPrefixes: [prefix], eventTypes: types } }, (e) => {
          both.push(e);
        });
        await waitFor(() => both.length >= 3 && byType.some((e) => e.id === last.id));
        await Promise.all([s1.stop(), s2.stop()]);
        expect(ids(both)).toEqual(ids([wanted, alsoWanted, last]));
        expect(byType.every((e) => types.includes(e.type))).toBe(true);
        expect(ids(byType.filter((e) => e.stream.startsWith(prefix) || e.stream === otherStream))).toEqual(ids([wanted, otherWanted, alsoWanted, last]));
      });

      it('starts strictly after `after`', async () => {
        const prefix = uniquePrefix('from');
        const after = await head();
        const all = events(3);
        await store.append(`${prefix}s`, all, 'no_stream');
        const [first] = await readAllUnder(prefix, after, 3);
        const seen: RecordedEvent[] = [];
        const subscription = store.subscribeToAll({ after: first.position, filter: { streamPrefixes: [prefix] } }, (e) => {
          seen.push(e);
        });
        await waitFor(() => seen.length >= 2);
        await subscription.stop();
        expect(ids(seen)).toEqual(ids(all.slice(1)));
      });

      it('awaits the handler one event at a time, and stop() waits for the running handler', async () => {
        const prefix = uniquePrefix('stop');
        const after = await head();
        await store.append(`${prefix}s`, events(3), 'no_stream');
        let release!: () => void;
        const gate = new Promise<void>((resolve) => (release = resolve));
        const log: string[] = [];
        const subscription = store.subscribeToAll({ after, filter: { streamPrefixes: [prefix] } }, async (e) => {
          log.push(`start ${e.revision}`);
          await gate;
          log.push(`end ${e.revision}`);
        });
        await waitFor(() => log.length > 0);
        let stopped = false;
        const stopping = subscription.stop().then(() => (stopped = true));
        await sleep(100);
        expect(stopped).toBe(false);
        expect(log).toEqual(['start 0']);
        release();
        await stopping;
        expect(log).toEqual(['start 0', 'end 0']);
      });

      it('stops on a handler error and passes it to onError', async () => {
        const prefix = uniquePrefix('err');
        const after = await head();
        await store.append(`${prefix}s`, events(3), 'no_stream');
        const failure = new Error('handler failed');
        const seen: bigint[] = [];
        const errors: unknown[] = [];
        const subscription = store.subscribeToAll(
          { after, filter: { streamPrefixes: [prefix] } },
          (e) => {
            seen.push(e.revision);
            if (e.revision === 1n) throw failure;
          },
          (err) => errors.push(err),
        );
        await waitFor(() => errors.length > 0);
        await sleep(200);
        await subscription.stop();
        expect(errors).toEqual([failure]);
        expect(seen).toEqual([0n, 1n]);
      });
    });

    describe('watchAppends', () => {
      it('calls the listener after this store appends, until unsubscribed', async () => {
        let calls = 0;
        const unwatch = store.watchAppends(() => calls++);
        await sleep(200); // an adapter may signal once when its channel opens
        const stream = uniqueStream();
        const before = calls;
        await store.append(stream, [event()], 'no_stream');
        await waitFor(() => calls > before);
        unwatch();
        await sleep(50);
        const settled = calls;
        await store.append(stream, [event()], 0n);
        await sleep(300);
        expect(calls).toBe(settled);
      });

      it("tells this process's watchers that a reader waits (requestCatchUp), apart from an append", async () => {
        const hints: string[] = [];
        const unwatch = store.watchAppends((hint) => hints.push(hint));
        await sleep(200); // an adapter may signal once when its channel opens
        await store.append(uniqueStream(), [event()], 'no_stream');
        await waitFor(() => hints.includes('appended'));
        const before = hints.filter((h) => h === 'catch-up').length;
        store.requestCatchUp();
        await waitFor(() => hints.filter((h) => h === 'catch-up').length > before);
        unwatch();
      });

      it('wakes a watcher of the second store (another process) when the first appends', async () => {
        // Without a second store (PGlite: one process) this is the first store's own watcher.
        let woken = false;
        const unwatch = other.watchAppends(() => (woken = true));
        await sleep(200);
        woken = false; // ignore a signal sent when the channel opened
        const stream = uniqueStream();
        // The second store may still be setting up its channel: keep appending until it hears.
        let expected: ExpectedRevision = 'no_stream';
        const deadline = Date.now() + 5000;
        while (!woken && Date.now() < deadline) {
          expected = (await store.append(stream, [event()], expected)).nextRevision;
          await sleep(100);
        }
        unwatch();
        expect(woken).toBe(true);
      });
    });

    describe('upcasting', () => {
      /** Events of type Versioned recorded before `v` existed read as version 2, their `n` doubled into `twice`. */
      const toV2: Upcaster = (e) => {
        const data = e.data as { n: number; v?: number; twice?: number };
        return e.type === 'Versioned' && data.v === undefined ? { ...e, data: { ...data, v: 2, twice: data.n * 2 } } : e;
      };

      it('reads every event through the upcaster: read stream, read all, subscriptions; the log keeps what was recorded', async () => {
        const upcasting = await fixture!.makeUpcastingStore(toV2);
        const prefix = uniquePrefix('upcast');
        const stream = `${prefix}s`;
        const after = await head();
        const old = event('Versioned', { n: 21 });
        const current = event('Versioned', { n: 5, v: 2, twice: 10 });
        const unrelated = event('Other', { n: 1 });
        await store.append(stream, [old, current, unrelated], 'no_stream');

        const upcast = [
          { id: old.id, type: 'Versioned', data: { n: 21, v: 2, twice: 42 } },
          { id: current.id, type: 'Versioned', data: { n: 5, v: 2, twice: 10 } },
          { id: unrelated.id, type: 'Other', data: { n: 1 } },
        ];
        expect(await upcasting.readStream(stream)).toMatchObject(upcast);
        expect(await upcasting.readStream(stream, { direction: 'backwards', maxCount: 1, fromRevision: 0n })).toMatchObject([upcast[0]]);
        const deadline = Date.now() + 5000;
        let all: RecordedEvent[] = [];
        while (all.length < 3 && Date.now() < deadline) {
          all = (await upcasting.readAll({ after, maxCount: 10_000 })).filter((e) => e.stream === stream);
          if (all.length < 3) await sleep(20);
        }
        expect(all).toMatchObject(upcast);

        const delivered: RecordedEvent[] = [];
        const subscription = upcasting.subscribeToAll({ after, filter: { streamPrefixes: [prefix] } }, (e) => {
          delivered.push(e);
        });
        await waitFor(() => delivered.length >= 3);
        await subscription.stop();
        expect(delivered).toMatchObject(upcast);

        if (upcasting.appendExclusive) {
          let seen: RecordedEvent[] = [];
          await upcasting.appendExclusive(stream, -1n, (newer) => {
            seen = newer;
            return [];
          });
          expect(seen).toMatchObject(upcast);
        }

        // The store without the upcaster reads the event as it was recorded.
        expect((await store.readStream(stream))[0].data).toEqual({ n: 21 });
      });
    });

    describe('event content', () => {
      it('round-trips data and metadata (nested JSON, unicode) through readStream and readAll', async () => {
        const prefix = uniquePrefix('content');
        const after = await head();
        const data = {
          text: 'héllo wörld — 你好 🎉 \u2028 "quoted" \\ back',
          nested: { list: [1, 2.5, -3, true, false, null, { deep: ['x', { deeper: 'y' }] }], empty: {}, none: [] },
          big: 9007199254740991,
        };
        const metadata = {
          correlationId: randomUUID(),
          causationId: randomUUID(),
          actor: 'user:ünïcode',
          ip: '2001:db8::1',
          at: '2025-01-02T03:04:05.678Z',
          extra: { tags: ['a', 'b'] },
        };
        const full = event('ContentTested', data, metadata);
        const bare = event('ContentBare', ['a', 1]);
        const scalar = event('ContentScalar', 'just a string');
        await store.append(`${prefix}s`, [full, bare, scalar], 'no_stream');

        const expected = [
          { id: full.id, type: 'ContentTested', data, metadata, stream: `${prefix}s`, revision: 0n },
          { id: bare.id, type: 'ContentBare', data: ['a', 1], metadata: {}, stream: `${prefix}s`, revision: 1n },
          { id: scalar.id, type: 'ContentScalar', data: 'just a string', metadata: {}, stream: `${prefix}s`, revision: 2n },
        ];
        const fromStream = await store.readStream(`${prefix}s`);
        expect(fromStream).toEqual(expected.map((e, i) => ({ ...e, position: fromStream[i].position })));
        expect(await readAllUnder(prefix, after, 3)).toEqual(fromStream);
      });
    });
  });
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Polls `condition` every 10 ms until it holds; fails after `timeoutMs`. */
export async function waitFor(condition: () => boolean | Promise<boolean>, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await sleep(10);
  }
}
