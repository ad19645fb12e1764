import type { Command } from 'commander';
import { accountStatement, statementCsv, statementJson } from '@svc/ledger';
import type { Runtime } from '@svc/runtime';

type WithRuntime = <T>(fn: (runtime: Runtime) => Promise<T>) => Promise<T>;

const FORMATS = ['json', 'csv'] as const;

/**
 * `ledger statement` (issue 23): the account's statement for a period that has ended, replayed
 * from its stream, through the same use case as GET /v1/credits/statement.
 */
export function ledgerStatementCommand(ledger: Command, withRuntime: WithRuntime): void {
  ledger
    .command('statement')
    .description(
      'opening balance, credits, charges (per day, model and key, with meters), releases, expiries, adjustments and closing balance of [from, to), replayed from the event log; a period that has ended never changes',
    )
    .requiredOption('--account <id>', 'the account')
    .requiredOption('--from <time>', 'ISO 8601 date or date-time, UTC when no offset (inclusive)')
    .requiredOption('--to <time>', 'ISO 8601 date or date-time, UTC when no offset (exclusive; not in the future; at most 366 days after --from)')
    .option('--format <format>', 'json or csv', 'json')
    .action((options: { account: string; from: string; to: string; format: string }) => {
      if (!(FORMATS as readonly string[]).includes(options.format)) throw new Error(`--format must be json or csv: ${JSON.stringify(options.format)}`);
      return withRuntime(async (runtime) => {
        const statement = await accountStatement(runtime.store, options.account, { from: options.from, to: options.to }, runtime.clock.now());
        console.log(options.format === 'csv' ? statementCsv(statement).trimEnd() : JSON.stringify(statementJson(statement), null, 2));
      });
    });
}
