import { Logger } from '@nestjs/common';
import type { AggregateStore } from '@svc/eventstore';
import { DomainError } from '@svc/eventstore';
import { accountDecider, type AccountCommand, type AccountEvent, type AccountState } from './account';
import { LedgerCommand, LedgerCommandHandler } from './ledger.module';
import { placeHold, stats } from './testing/account-fixtures';

/** One stream kept in memory: decide, then evolve, as the real AggregateStore does without conflicts. */
function memoryAggregates(now: Date, failOn?: AccountCommand['type']) {
  let state: AccountState = accountDecider.initialState();
  const log: AccountEvent[] = [];
  const store = {
    async handle(_decider: unknown, _stream: string, command: AccountCommand) {
      if (command.type === failOn) throw new Error('store down');
      const events = accountDecider.decide(command, state, now);
      state = events.reduce(accountDecider.evolve, state);
      log.push(...events);
      return { events, state, appended: null };
    },
  };
  return { aggregates: store as unknown as AggregateStore, log };
}

const run = (handler: LedgerCommandHandler, command: AccountCommand) => handler.execute(new LedgerCommand('a1', command));

describe('ledger command handler', () => {
  const capped = placeHold('h1', 50n, { keyLimit: { limitNano: 10n, reset: 'monthly' } });

  async function setUp(failOn?: AccountCommand['type']) {
    const { aggregates, log } = memoryAggregates(new Date('2026-11-02T10:00:00Z'), failOn);
    const handler = new LedgerCommandHandler(aggregates);
    await run(handler, { type: 'OpenAccount', accountId: 'a1' });
    await run(handler, { type: 'AddCredits', amountNano: 1000n, reason: 'signup' });
    return { handler, log };
  }

  it('rethrows a spend limit refusal after recording KeySpendCapReached, once per window', async () => {
    const { handler, log } = await setUp();
    // Issue 41 item 18: a refusal is "reached" when the window's charges are at the limit.
    await run(handler, placeHold('h0', 10n, { keyLimit: { limitNano: 20n, reset: 'monthly' } }));
    await run(handler, { type: 'ChargeUsage', holdId: 'h0', amountNano: 10n, stats: stats() });
    await expect(run(handler, capped)).rejects.toMatchObject({ code: 'monthly_spend_cap_reached' });
    await expect(run(handler, { ...capped, holdId: 'h2' })).rejects.toMatchObject({ code: 'monthly_spend_cap_reached' });
    expect(log.filter((e) => e.type === 'KeySpendCapReached')).toHaveLength(1);
  });

  it('records nothing for a 402', async () => {
    const { handler, log } = await setUp();
    await expect(run(handler, placeHold('h1', 5000n))).rejects.toMatchObject({ code: 'insufficient_quota' });
    expect(log.map((e) => e.type)).toEqual(['AccountOpened', 'CreditsAdded']);
  });

  it('still answers with the refusal when recording it fails, and logs why', async () => {
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    const { handler } = await setUp('RecordLimitRefusal');
    const refused = run(handler, capped);
    await expect(refused).rejects.toBeInstanceOf(DomainError);
    await expect(refused).rejects.toMatchObject({ code: 'monthly_spend_cap_reached' });
    expect(warn).toHaveBeenCalledWith(expect.stringContaining('store down'));
    warn.mockRestore();
  });
});
