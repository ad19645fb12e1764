import type { INestApplicationContext } from '@nestjs/common';
import { CommandBus } from '@nestjs/cqrs';
import { HoldExpirySweeper } from '../libs/ledger/src/hold-expiry';
import { LedgerCommand } from '../libs/ledger/src/ledger.module';
import { accountsWithExpiredHolds } from '../libs/projections/src';
import type { Runtime } from './runtime';

/** The hold expiry sweeper, wired to the command bus and the credits read model. */
export function holdExpirySweeper(runtime: Runtime, app: INestApplicationContext, intervalMs?: number): HoldExpirySweeper {
  const commands = app.get(CommandBus);
  return new HoldExpirySweeper(
    {
      dueAccounts: (now) => accountsWithExpiredHolds(runtime.sql, now),
      expire: async (accountId) => {
        const { events } = await commands.execute(new LedgerCommand(accountId, { type: 'ExpireHolds' }, { actor: 'hold-expiry' }));
        return events.filter((e) => e.type === 'HoldExpired').length;
      },
      clock: runtime.clock,
    },
    intervalMs,
  );
}

/** Projections and sweepers: what the worker runs, and `npm start` beside the gateway. */
export function startBackground(runtime: Runtime, app: INestApplicationContext): { sweeper: HoldExpirySweeper; stop(): Promise<void> } {
  runtime.projections.start();
  const sweeper = holdExpirySweeper(runtime, app);
  sweeper.start();
  return {
    sweeper,
    stop: async () => {
      await sweeper.stop();
      await runtime.projections.stop();
    },
  };
}
