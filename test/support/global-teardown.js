const { Client } = require('pg');

const ADMIN_URL = process.env.PG_ADMIN_URL || 'postgres://postgres@127.0.0.1:5432/postgres';

module.exports = async function globalTeardown() {
  const name = process.env.SVC_TEST_CREATED_DATABASE;
  if (!name) return;
  const admin = new Client({ connectionString: ADMIN_URL });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin.end();
};
