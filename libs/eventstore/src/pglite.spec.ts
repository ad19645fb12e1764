import { PgliteSqlRunner } from '@svc/platform';
import type { Upcaster } from './port';
import { SqlEventStore } from './sql-event-store';
import { eventStoreContract } from './testing/contract';
import { sqlEventStoreContract } from './testing/sql-contract';
import { memoryPglite } from '@svc/platform/testing/pglite';

// One in-memory PGlite for the file (PGlite.create costs seconds); the suites keep their
// tests apart with unique stream names.
//
// No late-commit test here, unlike postgres.spec.ts: PGlite has a single backend session and
// runs one transaction at a time, so a transaction can never commit "late" behind another.
let runner: PgliteSqlRunner;
beforeAll(async () => {
  runner = await memoryPglite();
});
afterAll(async () => {
  await runner?.close();
});

async function openStore(upcast?: Upcaster): Promise<SqlEventStore> {
  const store = new SqlEventStore(runner, { pollIntervalMs: 50, upcast });
  await store.init();
  return store;
}

eventStoreContract('pglite', async () => {
  const store = await openStore();
  const upcasting: SqlEventStore[] = [];
  return {
    store,
    makeUpcastingStore: async (upcast) => {
      const opened = await openStore(upcast);
      upcasting.push(opened);
      return opened;
    },
    cleanup: async () => {
      for (const s of upcasting) await s.close();
      await store.close();
    },
  };
});

sqlEventStoreContract('pglite', async () => {
  const store = await openStore();
  return { store, runner, cleanup: () => store.close() };
});
