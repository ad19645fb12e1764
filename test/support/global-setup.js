// Every run gets its own PostgreSQL database: CI passes one in DATABASE_URL; a developer's
// run creates `svc_test_<pid>` on the local server and drops it in global-teardown.js.
const { Client } = require('pg');

const ADMIN_URL = process.env.PG_ADMIN_URL || 'postgres://postgres@127.0.0.1:5432/postgres';

module.exports = async function globalSetup() {
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
};
