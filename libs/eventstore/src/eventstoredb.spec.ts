import { EventStoreDbEventStore } from './eventstoredb-event-store';
import { eventStoreContract } from './testing/contract';

// No EventStoreDB server can run on the project's test machines (no Docker engine, no
// package): this suite runs wherever EVENTSTORE_URL points at one (docker-compose.yml
// provides it), e.g. EVENTSTORE_URL='esdb://127.0.0.1:2113?tls=false'.
const url = process.env.EVENTSTORE_URL;

(url ? describe : describe.skip)('EventStoreDB adapter', () => {
  eventStoreContract('eventstoredb', async () => {
    const store = new EventStoreDbEventStore(url!);
    await store.init();
    let second: EventStoreDbEventStore | undefined;
    let upcasting: EventStoreDbEventStore | undefined;
    return {
      store,
      // A second client: its own gRPC connection, as another process would have.
      makeSecondStore: async () => (second = new EventStoreDbEventStore(url!)),
      makeUpcastingStore: async (upcast) => (upcasting = new EventStoreDbEventStore(url!, { upcast })),
      cleanup: async () => {
        await upcasting?.close();
        await second?.close();
        await store.close();
      },
    };
  });
});

// What the adapter decides on its own, before any server call: runs everywhere.
describe('EventStoreDB adapter without a server', () => {
  it('refuses an oversized append client-side, with the same count as every adapter', async () => {
    const store = new EventStoreDbEventStore('esdb://127.0.0.1:1?tls=false', { maxAppendBytes: 100 });
    const event = { id: '0b0e5b8a-3a5e-4b8e-9f3c-2f2c7b8a9d10', type: 'Tested', data: { s: 'é'.repeat(43) } };
    await expect(store.append('s', [event], 'any')).rejects.toMatchObject({
      name: 'AppendTooLargeError',
      bytes: 102,
      limit: 100,
    });
    await store.close();
  });
});
