import { routeLabel, ServiceMetrics, upstreamErrorCode } from './metrics';
import { WrongExpectedVersionError, type EventStore } from '@svc/eventstore';
import { ProviderError } from '@svc/providers';

describe('routeLabel', () => {
  it('writes Fastify templates as the spec does, and unmatched for no route', () => {
    expect(routeLabel('/v1/chat/completions')).toBe('/v1/chat/completions');
    expect(routeLabel('/v1/keys/:id')).toBe('/v1/keys/{id}');
    expect(routeLabel('/admin/orgs/:id/members/:account_id')).toBe('/admin/orgs/{id}/members/{account_id}');
    expect(routeLabel('/v1/files/:file_id(^f.+)/content')).toBe('/v1/files/{file_id}/content');
    expect(routeLabel(undefined)).toBe('unmatched');
    expect(routeLabel('')).toBe('unmatched');
  });
});

describe('upstreamErrorCode', () => {
  it('maps provider errors to bounded codes', () => {
    expect(upstreamErrorCode(new ProviderError({ kind: 'http', status: 503, message: 'x' }))).toBe('upstream_503');
    expect(upstreamErrorCode(new ProviderError({ kind: 'timeout', status: 504, message: 'x' }))).toBe('timeout');
    expect(upstreamErrorCode(new ProviderError({ kind: 'network', status: 502, message: 'x' }))).toBe('network');
    expect(upstreamErrorCode(new Error('anything the caller wrote'))).toBe('error');
    expect(upstreamErrorCode(undefined)).toBe('error');
  });
});

describe('ServiceMetrics.observed', () => {
  it("times each append and leaves every other member the store's own", async () => {
    const metrics = new ServiceMetrics({ sql: { query: async () => ({ rows: [] }) } as never });
    const store = {
      name: 'pglite',
      calls: 0,
      async append() {
        this.calls++;
        return { nextRevision: 0n, position: 'p' };
      },
      async countEventsAfter() {
        return this.calls;
      },
    };
    const timed = metrics.observed(store as unknown as EventStore) as unknown as typeof store;
    await (timed as unknown as EventStore).append('s', [], 'any' as never);
    await (timed as unknown as EventStore).append('s', [], 'any' as never);
    expect(store.calls).toBe(2);
    expect(await timed.countEventsAfter()).toBe(2);
    expect(timed.name).toBe('pglite');
    expect(timed.countEventsAfter).toBe(timed.countEventsAfter);
    const text = await metrics.registry.metrics();
    expect(text).toMatch(/^svc_event_store_append_seconds_count 2$/m);
  });

  it('counts the charges an append records, once each, and none of a failed append', async () => {
    const metrics = new ServiceMetrics({ sql: { query: async () => ({ rows: [] }) } as never });
    let fail = false;
    const store = {
      async append() {
        if (fail) throw new Error('wrong expected revision');
        return { nextRevision: 0n, position: 'p' };
      },
    } as unknown as EventStore;
    const observed = metrics.observed(store);
    const charge = (amount: string) => ({ id: amount, type: 'UsageCharged', data: { amount_nano: amount }, metadata: {} });
    await observed.append('account-a', [charge('1500'), { id: 'x', type: 'HoldPlaced', data: { amount_nano: '9999' }, metadata: {} }], 'any' as never);
    await observed.append('account-b', [charge('0'), charge('2500')], 'any' as never);
    fail = true;
    await expect(observed.append('account-c', [charge('7')], 'any' as never)).rejects.toThrow();
    const text = await metrics.registry.metrics();
    expect(text).toMatch(/^svc_charges_total 3$/m);
    expect(text).toMatch(/^svc_charged_nano_usd_total 4000$/m);
  });

  it("counts the lost races and the turns under the stream's lock, and no other failure as a race (issue 45)", async () => {
    const metrics = new ServiceMetrics({ sql: { query: async () => ({ rows: [] }) } as never });
    let failure: Error | null = null;
    const store = {
      async append() {
        if (failure) throw failure;
        return { nextRevision: 0n, position: 'p' };
      },
      async appendExclusive(_stream: string, after: bigint, decide: (newer: never[]) => unknown[]) {
        decide([]);
        return { revision: after + 1n, appended: { nextRevision: after + 1n, position: 'p' } };
      },
    } as unknown as EventStore;
    const observed = metrics.observed(store);
    await observed.append('account-a', [], 'any' as never);
    failure = new WrongExpectedVersionError('account-a', 3n, 5n);
    await expect(observed.append('account-a', [], 3n)).rejects.toBe(failure);
    await expect(observed.append('account-a', [], 3n)).rejects.toBe(failure);
    failure = new Error('connection reset');
    await expect(observed.append('account-a', [], 3n)).rejects.toBe(failure);
    await observed.appendExclusive!('account-a', 5n, () => []);
    const text = await metrics.registry.metrics();
    expect(text).toMatch(/^svc_event_store_lost_races_total 2$/m);
    expect(text).toMatch(/^svc_event_store_locked_appends_total 1$/m);
  });
});
