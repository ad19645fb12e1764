const { rmSync } = require('node:fs');
const { dirname } = require('node:path');
const { Client } = require('pg');

const ADMIN_URL = process.env.PG_ADMIN_URL || 'postgres://postgres@127.0.0.1:5432/postgres';

module.exports = async function globalTeardown() {
  const template = process.env.SVC_TEST_PGLITE_TEMPLATE;
  if (template) rmSync(dirname(template), { recursive: true, force: true });
  const memory = process.env.SVC_TEST_MEMORY_TMPDIR;
  if (memory) rmSync(memory, { recursive: true, force: true });
  const name = process.env.SVC_TEST_CREATED_DATABASE;
  if (!name) return;
  const admin = new Client({ connectionString: ADMIN_URL });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin.end();
};
