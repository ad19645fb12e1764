import 'reflect-metadata';
import { closeOnSignals, configOrExit, runMain } from '../../../src/process';
import { createRuntime } from '../../../src/runtime';

/** Background work: keeps every projection up to date from the event log. */
runMain(async () => {
  const runtime = await createRuntime(configOrExit(), { withProviders: false });
  runtime.projections.start();
  console.log(`svc-worker running projections: ${runtime.projections.projections.map((p) => p.name).join(', ')}`);
  closeOnSignals(() => runtime.close());
});
