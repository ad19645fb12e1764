import { ConfigError, loadConfig } from '@svc/platform';
import { freshPgRunner } from '@svc/platform/testing/pg';
import { createRuntime } from './runtime';

/** A URL of the run's database whose search_path is `schema`. */
function inSchema(schema: string, applicationName: string): string {
  const url = new URL(process.env.DATABASE_URL!);
  url.searchParams.set('options', `-c search_path=${schema}`);
  url.searchParams.set('application_name', applicationName);
  return url.toString();
}

/**
 * DATABASE_SESSION_URL must reach what DATABASE_URL reaches: an append's NOTIFY is heard only in
 * its database, and an authentication cache ignores the invalidations of another schema, so a
 * revoked key would stay cached. A pooler that drops the search_path (PgBouncer ignores
 * `options`) makes exactly that mistake; the process refuses to start on it.
 */
describe('createRuntime with DATABASE_SESSION_URL', () => {
  it('refuses to start when the sessions reach another schema than the statements, naming the variable', async () => {
    const statements = await freshPgRunner('rt_sessions');
    const sessions = await freshPgRunner('rt_sessions_other');
    await Promise.all([statements.close(), sessions.close()]);
    const config = loadConfig({ DATABASE_URL: inSchema(statements.schema, 'a'), DATABASE_SESSION_URL: inSchema(sessions.schema, 'b') });
    const refused = await createRuntime(config, { withProviders: false }).then(
      () => null,
      (err: unknown) => err,
    );
    expect(refused).toBeInstanceOf(ConfigError);
    expect((refused as Error).message).toMatch(
      new RegExp(`^DATABASE_SESSION_URL: reaches \\w+\\.${sessions.schema} \\(database\\.schema\\), but DATABASE_URL reaches \\w+\\.${statements.schema}`),
    );
  });

  it('starts when both reach the same schema', async () => {
    const runner = await freshPgRunner('rt_sessions_same');
    await runner.close();
    const config = loadConfig({ DATABASE_URL: inSchema(runner.schema, 'statements'), DATABASE_SESSION_URL: inSchema(runner.schema, 'sessions') });
    expect(config.databaseSessionUrl).not.toBeNull();
    const runtime = await createRuntime(config, { withProviders: false });
    try {
      expect((await runtime.sql.query<{ schema: string }>('SELECT current_schema() AS schema')).rows).toEqual([{ schema: runner.schema }]);
    } finally {
      await runtime.close();
    }
  });
});
