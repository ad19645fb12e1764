const { rmSync } = require('node:fs');
const { dirname } = require('node:path');
const { Client } = require('pg');

const ADMIN_URL = process.env.PG_ADMIN_URL || 'postgres://postgres@127.0.0.1:5432/postgres';

/** Removes what global-setup.js made, and only that: a jest a suite starts inherits the enclosing run's environment. */
module.exports = async function globalTeardown() {
  const { template, memory, database: name } = globalThis.svcTestMade ?? {};
  if (template) rmSync(dirname(template), { recursive: true, force: true });
  if (memory) rmSync(memory, { recursive: true, force: true });
  if (!name) return;
  const admin = new Client({ connectionString: ADMIN_URL });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin.end();
};
