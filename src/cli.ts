import 'reflect-metadata';
import { SingleBar, Presets } from 'cli-progress';
import { NestFactory } from '@nestjs/core';
import { Command } from 'commander';
import { GatewayModule } from '../apps/gateway/src/gateway.module';
import { devAdminToken, ensureDevKeys } from './dev-bootstrap';
import { configOrExit, runMain } from './process';
import { createRuntime, type Runtime } from './runtime';

/** Operator CLI: `npm run cli -- <command>`. */
async function withRuntime<T>(fn: (runtime: Runtime) => Promise<T>): Promise<T> {
  const runtime = await createRuntime(configOrExit(), { withProviders: false });
  try {
    return await fn(runtime);
  } finally {
    await runtime.close();
  }
}

export function buildCli(): Command {
  const program = new Command('svc').description('svc-gateway operator CLI').showHelpAfterError();
  const projections = program.command('projections').description('read models built from the event log');

  projections
    .command('status')
    .description('checkpoint position and lag (events behind the log) of every projection')
    .action(() =>
      withRuntime(async (runtime) => {
        const rows = await runtime.projections.status();
        const width = Math.max(...rows.map((r) => r.name.length), 'projection'.length);
        console.log(`${'projection'.padEnd(width)}  ${'lag'.padStart(8)}  position`);
        for (const r of rows) console.log(`${r.name.padEnd(width)}  ${String(r.lag).padStart(8)}  ${r.position || '(start)'}`);
      }),
    );

  projections
    .command('rebuild [name]')
    .description('empty a projection (all when no name is given) and replay the log from position 0')
    .action((name: string | undefined) =>
      withRuntime(async (runtime) => {
        const names = name ? [name] : runtime.projections.projections.map((p) => p.name);
        for (const n of names) {
          const bar = new SingleBar({ format: `${n.padEnd(12)} [{bar}] {value}/{total} events`, noTTYOutput: true, notTTYSchedule: 1000 }, Presets.shades_classic);
          let startedBar = false;
          const count = await runtime.projections.rebuild(n, (done, total) => {
            if (!startedBar) {
              bar.start(total, done);
              startedBar = true;
            } else bar.update(done, { total });
            bar.setTotal(total);
          });
          if (startedBar) bar.stop();
          console.log(`${n}: rebuilt from ${count} events`);
        }
      }),
    );
  program
    .command('dev-keys')
    .description('create on first use, then print, the dev account ($10.00) and its keys; written to $SVC_DATA_DIR/dev-keys.json')
    .action(() =>
      withRuntime(async (runtime) => {
        // The keys must authenticate when printed, so this process projects too (safe beside a worker).
        runtime.projections.start();
        const context = await NestFactory.createApplicationContext(GatewayModule.forRoot(runtime), { logger: false });
        try {
          const { keys } = await ensureDevKeys(context, runtime.config, devAdminToken(runtime.config));
          console.log(JSON.stringify(keys, null, 2));
        } finally {
          await context.close();
        }
      }),
    );
  return program;
}

if (require.main === module) runMain(async () => void (await buildCli().parseAsync(process.argv)));
