// Every run gets its own PostgreSQL database: CI passes one in DATABASE_URL; a developer's
// run creates `svc_test_<pid>` on the local server and drops it in global-teardown.js.
// And one empty PGlite cluster, which the suites' gateways copy (pglite-template.ts).
const { mkdtempSync } = require('node:fs');
const { tmpdir } = require('node:os');
const { join } = require('node:path');
const { Client } = require('pg');
const { PGlite } = require('@electric-sql/pglite');

const ADMIN_URL = process.env.PG_ADMIN_URL || 'postgres://postgres@127.0.0.1:5432/postgres';

async function pgliteTemplate() {
  const dir = join(mkdtempSync(join(tmpdir(), 'svc-pglite-template-')), 'pglite');
  const db = await PGlite.create(dir);
  await db.close();
  process.env.SVC_TEST_PGLITE_TEMPLATE = dir;
}

async function database() {
  if (process.env.DATABASE_URL) return;
  const name = `svc_test_${process.pid}_${Date.now()}`;
  const admin = new Client({ connectionString: ADMIN_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(ADMIN_URL);
  url.pathname = `/${name}`;
  process.env.DATABASE_URL = url.toString();
  process.env.SVC_TEST_CREATED_DATABASE = name;
}

module.exports = async function globalSetup() {
  await Promise.all([pgliteTemplate(), database()]);
};
