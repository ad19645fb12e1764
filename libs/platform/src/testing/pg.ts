import { randomBytes } from 'node:crypto';
import { PgSqlRunner } from '../sql';

/**
 * A PostgreSQL runner on the run's database (DATABASE_URL, set by test/support/global-setup.js)
 * whose search_path is a schema of its own, so suites never see each other's tables.
 */
export async function freshPgRunner(prefix = 't'): Promise<PgSqlRunner & { schema: string }> {
  const url = process.env.DATABASE_URL;
  if (!url) throw new Error('DATABASE_URL is not set; run the tests through jest (global-setup)');
  const schema = `${prefix}_${randomBytes(6).toString('hex')}`;
  const bootstrap = await PgSqlRunner.connect({ connectionString: url, max: 1 });
  await bootstrap.exec(`CREATE SCHEMA ${schema}`);
  await bootstrap.close();
  const runner = await PgSqlRunner.connect({ connectionString: url, options: `-c search_path=${schema}` });
  return Object.assign(runner, { schema });
}
