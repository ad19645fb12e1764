import 'reflect-metadata';
import { SingleBar, Presets } from 'cli-progress';
import type { INestApplicationContext } from '@nestjs/common';
import { Command, InvalidArgumentError } from 'commander';
import type { KeyRequest } from '@svc/management';
import { balanceOf, auditFindings, formatLedgerAudit, LedgerAuditFailedError, ledgerAuditJson, parseInstant, runLedgerAudit } from '@svc/ledger';
import { bodyValidation, nanoToUsd } from '@svc/platform';
import type { Runtime } from '@svc/runtime';
import { ledgerExportCommands } from './cli-ledger-export';
import { ledgerStatementCommand } from './cli-ledger-statement';
import { runMain } from './process';

const print = (value: unknown) => console.log(JSON.stringify(value, null, 2));

const MAX_REASON_LENGTH = 200;

function creditReason(value: string): string {
  const reason = value.trim();
  if (reason.length === 0 || reason.length > MAX_REASON_LENGTH || /[\u0000-\u001f\u007f]/.test(reason)) {
    throw new InvalidArgumentError(`give a reason of 1-${MAX_REASON_LENGTH} characters on one line`);
  }
  return reason;
}

// Required once a command's arguments are accepted, not when the CLI starts: they take about a
// second to load, and a command refused for its arguments (or --help) needs none of them.
const cliContext = () => require('./cli-context') as typeof import('./cli-context');
const management = () => require('@svc/management') as typeof import('@svc/management');
const devBootstrap = () => require('./dev-bootstrap') as typeof import('./dev-bootstrap');
const adminOf = (context: INestApplicationContext) => context.get(management().AdminService);

/** Operator CLI: `npm run cli -- <command>`. */
function withRuntime<T>(fn: (runtime: Runtime) => Promise<T>): Promise<T> {
  return cliContext().withRuntime(fn);
}

function withServices<T>(fn: (context: INestApplicationContext, runtime: Runtime) => Promise<T>): Promise<T> {
  return cliContext().withServices(fn);
}

export function buildCli(): Command {
  const program = new Command('svc')
    .description('svc-gateway operator CLI')
    .showHelpAfterError()
    // Read by runMain from the command line (a failure can come before options are parsed).
    .option('--debug', 'on failure, print the stack trace too (as LOG_LEVEL=debug does)');
  projectionCommands(program);
  ledgerCommands(program);
  devKeysCommand(program);
  accountCommands(program);
  keyCommands(program);
  organizationCommands(program);
  auditLogCommand(program);
  return program;
}

function projectionCommands(program: Command): void {
  const projections = program.command('projections').description('read models built from the event log');

  projections
    .command('status')
    .description('checkpoint position, lag (events behind the log) and events set aside of every projection')
    .action(() =>
      withRuntime(async (runtime) => {
        const rows = await runtime.projections.status();
        const width = Math.max(...rows.map((r) => r.name.length), 'projection'.length);
        console.log(`${'projection'.padEnd(width)}  ${'lag'.padStart(8)}  ${'set aside'.padStart(9)}  position`);
        for (const r of rows)
          console.log(`${r.name.padEnd(width)}  ${String(r.lag).padStart(8)}  ${String(r.quarantined).padStart(9)}  ${r.position || '(start)'}`);
        const quarantined = await runtime.projections.quarantined();
        if (quarantined.length > 0) {
          console.log('\nevents set aside (a projection could not apply them; see projection_quarantine):');
          for (const q of quarantined) console.log(`  ${q.projection}  ${q.position}  ${q.event_type} ${q.event_id}  ${q.quarantined_at}  ${q.error}`);
        }
      }),
    );

  projections
    .command('rebuild [name]')
    .description('empty a projection (all when no name is given) and replay the log from position 0')
    .action((name: string | undefined) =>
      withRuntime(async (runtime) => {
        const names = name ? [name] : runtime.projections.projections.map((p) => p.name);
        // One replay of the log for all of them: each batch is read once and applied to each.
        const bar = new SingleBar(
          { format: `${names.length === 1 ? names[0] : 'projections'} [{bar}] {value}/{total} events`, noTTYOutput: true, notTTYSchedule: 1000 },
          Presets.shades_classic,
        );
        let startedBar = false;
        const count = await runtime.projections.rebuild(names, (done, total) => {
          if (!startedBar) {
            bar.start(total, done);
            startedBar = true;
          } else bar.update(done, { total });
          bar.setTotal(total);
        });
        if (startedBar) bar.stop();
        for (const n of names) console.log(`${n}: rebuilt from ${count} events`);
      }),
    );
}

function ledgerCommands(program: Command): void {
  const ledger = program.command('ledger').description('the money ledger, from the event log');
  ledger
    .command('audit')
    .description(
      'replay the account streams alone: balance, open holds and per-key window spend at an instant, the ledger invariants, and (without --at) the credits and key usage projections compared; exits 1 on any finding',
    )
    .option('--account <id>', 'only this account')
    .option('--at <time>', 'ISO 8601 date or date-time, UTC when no offset: the ledger as it stood then (default: now, whole log)')
    .option('--json', 'print the report as JSON')
    .action((options: { account?: string; at?: string; json?: boolean }) => {
      // Issue 41 item 16: UTC when no offset, as statements and exports read theirs, whatever the machine's zone.
      const at = options.at === undefined ? undefined : parseInstant('--at', options.at);
      return withRuntime(async (runtime) => {
        const report = await runLedgerAudit(runtime.store, runtime.sql, { account: options.account, at, now: runtime.clock.now() });
        console.log(options.json ? ledgerAuditJson(report) : formatLedgerAudit(report).join('\n'));
        // An error makes runMain exit 1, so scripts and cron can alert on a failed audit.
        if (auditFindings(report) > 0) throw new LedgerAuditFailedError(report);
      });
    });
  ledgerExportCommands(ledger, withRuntime);
  ledgerStatementCommand(ledger, withRuntime);
}

function devKeysCommand(program: Command): void {
  program
    .command('dev-keys')
    .description('create on first use, then print, the dev account ($10.00) and its keys; written to $SVC_DATA_DIR/dev-keys.json')
    .action(() =>
      withServices(async (context, runtime) => {
        const { ensureDevKeys, devAdminToken } = devBootstrap();
        const { keys } = await ensureDevKeys(context, runtime.config, devAdminToken(runtime.config));
        print(keys);
      }),
    );
}

// The operator API's operations (docs/api/operator.md), recorded with actor "cli".
const CLI_ACTOR = { actor: 'cli' };
// A credit's reason is what its statement shows: the operator's words, else where it came from.
const reasonOption = ['--reason <text>', 'why the credits were given, shown on the account statement (at most 200 characters)', creditReason, 'cli'] as const;

function accountCommands(program: Command): void {
  const accounts = program.command('accounts').description('accounts and credits');
  accounts
    .command('create')
    .option('--credits <usd>', 'initial credits in USD', Number)
    .option(...reasonOption)
    .action((options: { credits?: number; reason: string }) =>
      withServices(async (context) => print({ id: await adminOf(context).createAccount(options.credits, CLI_ACTOR, options.reason) })),
    );
  accounts
    .command('credit <account> <usd>')
    .description('add credits to an account')
    .option(...reasonOption)
    .action((account: string, usd: string, options: { reason: string }) =>
      withServices(async (context) => {
        const admin = adminOf(context);
        await admin.addCredits(account, Number(usd), CLI_ACTOR, options.reason);
        const row = await admin.credits(account);
        print({ account_id: account, total_credits: nanoToUsd(row.purchasedNano), balance: nanoToUsd(balanceOf(row)) });
      }),
    );
}

function keyCommands(program: Command): void {
  program
    .command('keys')
    .command('create <account>')
    .description('create a key and print its secret once; --body takes the JSON body of POST /v1/keys')
    .option('--org <id>', 'create it inside this organization (the account must belong to it)')
    .option('--body <json>', 'name, scope, environment, limit, allowed_models, ... as in POST /v1/keys', '{}')
    .action((account: string, options: { org?: string; body: string }) =>
      withServices(async (context) => {
        let raw: unknown;
        try {
          raw = JSON.parse(options.body);
        } catch {
          throw new Error('--body is not JSON');
        }
        const { KeyRequest, KeysService } = management();
        const body = (await bodyValidation().transform(raw, { type: 'body', metatype: KeyRequest })) as KeyRequest;
        const keys = context.get(KeysService);
        const { record, secret } = await keys.create(await adminOf(context).keyOwner(account, options.org), body, CLI_ACTOR);
        const [data] = await keys.present([record]);
        print({ data, key: secret });
      }),
    );
}

function organizationCommands(program: Command): void {
  const orgs = program.command('orgs').description('organizations and their members');
  orgs
    .command('create <owner-account>')
    .option('--name <name>')
    .action((owner: string, options: { name?: string }) =>
      withServices(async (context) => print({ id: await adminOf(context).createOrg(owner, options.name, CLI_ACTOR) })),
    );
  orgs
    .command('add-member <org> <account> <role>')
    .description('role: admin or member')
    .action((org: string, account: string, role: string) =>
      withServices(async (context) => {
        if (role !== 'admin' && role !== 'member') throw new Error('role must be admin or member');
        await adminOf(context).changeOrg(org, { type: 'AddMember', accountId: account, role }, CLI_ACTOR);
        print({ org_id: org, account_id: account, role });
      }),
    );
  orgs.command('remove-member <org> <account>').action((org: string, account: string) =>
    withServices(async (context) => {
      await adminOf(context).changeOrg(org, { type: 'RemoveMember', accountId: account }, CLI_ACTOR);
      print({ org_id: org, account_id: account, removed: true });
    }),
  );
  orgs.command('delete <org>').action((org: string) =>
    withServices(async (context) => {
      await adminOf(context).changeOrg(org, { type: 'DeleteOrg' }, CLI_ACTOR);
      print({ id: org, deleted: true });
    }),
  );
}

function auditLogCommand(program: Command): void {
  program
    .command('audit-log')
    .description('who changed keys and organizations, newest first')
    .option('--account <id>', 'entries about this account or made by it')
    .option('--limit <n>', 'at most this many', Number, 100)
    .action((options: { account?: string; limit: number }) =>
      withServices(async (context) => print(await adminOf(context).auditLog(options.account ?? null, options.limit))),
    );
}

if (require.main === module) runMain(async () => void (await buildCli().parseAsync(process.argv)));
