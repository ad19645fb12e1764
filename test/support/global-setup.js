// Every run gets its own PostgreSQL database: CI passes one in DATABASE_URL; a developer's
// run creates `svc_test_<pid>` on the local server and drops it in global-teardown.js.
// And one PGlite cluster holding the gateway's tables, which the suites' gateways copy
// (pglite-template.ts); the suites' in-memory runners load it as it was before them, an image.
const { chmodSync, existsSync, mkdtempSync, statfsSync, writeFileSync } = require('node:fs');
const { tmpdir } = require('node:os');
const { dirname, join } = require('node:path');
const { Client } = require('pg');
const { PGlite } = require('@electric-sql/pglite');

const ADMIN_URL = process.env.PG_ADMIN_URL || 'postgres://postgres@127.0.0.1:5432/postgres';

/**
 * The run's temporary files (every gateway's PGlite cluster, its copies of the template, the
 * file stores) go to memory where the machine has a tmpfs: on a disk each PGlite commit waits
 * for its fsync and each cluster copy for the disk, twice as long and four times as long as in
 * memory, on every one of the run's gateways. The workers inherit TMPDIR, and os.tmpdir() reads
 * it at each call; global-teardown.js removes the directory. SVC_TEST_TMPDIR=disk keeps the default.
 */
function memoryTmpdir() {
  const shm = '/dev/shm';
  if (process.env.SVC_TEST_TMPDIR === 'disk' || !existsSync(shm)) return;
  const { bavail, bsize } = statfsSync(shm);
  if (bavail * bsize < 4 * 1024 ** 3) return;
  const dir = mkdtempSync(join(shm, 'svc-test-'));
  // As /tmp is: the PostgreSQL servers some suites start run as the postgres user.
  chmodSync(dir, 0o1777);
  process.env.TMPDIR = dir;
  process.env.SVC_TEST_MEMORY_TMPDIR = dir;
}

/**
 * The gateways' copies start with the tables a gateway's first start makes, made here once by the
 * same code: that first start took 3.4-3.8 s on a loaded machine, a later one 1.6-2.4. From the
 * build, as the suites' spawned gateways and workers are (`npm test` builds first); with no build
 * the template stays empty and each gateway makes its own. The in-memory image stays empty: the
 * suites that use it make and migrate their own tables.
 */
async function withGatewayTables(dataDir) {
  let runtime;
  let platform;
  try {
    runtime = require('../../dist/libs/runtime/src/index.js');
    platform = require('../../dist/libs/platform/src/index.js');
  } catch (err) {
    if (err.code === 'MODULE_NOT_FOUND') return;
    throw err;
  }
  const started = await runtime.createRuntime(platform.loadConfig({ SVC_DATA_DIR: dataDir }), { withProviders: false, servesRequests: false });
  await started.close();
}

async function pgliteTemplate() {
  const dir = join(mkdtempSync(join(tmpdir(), 'svc-pglite-template-')), 'pglite');
  const db = await PGlite.create(dir);
  // Every start of a PGlite cluster zeroes its shared buffers under WASM: with the default 128 MB
  // that took 0.6 s of CPU of each of the run's hundreds of starts (0.9 s in all, 0.3 s at 16 MB).
  // They are a cache: pages beyond them are read back through the file system, here in memory.
  // The product's own first start keeps the default.
  await db.exec("ALTER SYSTEM SET shared_buffers = '16MB'");
  // The same cluster as an image, for the suites' in-memory runners (platform/testing/pglite.ts).
  const image = join(dirname(dir), 'pglite.tar');
  writeFileSync(image, Buffer.from(await (await db.dumpDataDir('none')).arrayBuffer()));
  await db.close();
  await withGatewayTables(dirname(dir));
  process.env.SVC_TEST_PGLITE_TEMPLATE = dir;
  process.env.SVC_TEST_PGLITE_IMAGE = image;
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

/**
 * A jest started by a suite (console-no-chromium.e2e.ts) inherits the enclosing run's
 * environment: the temporary directory, the template, the image and the database are there
 * already, made by the run that removes them. It uses them, and its teardown leaves them.
 */
function madeByEnclosingRun() {
  const { SVC_TEST_PGLITE_TEMPLATE: template, SVC_TEST_PGLITE_IMAGE: image, DATABASE_URL: url } = process.env;
  return Boolean(template && image && url && existsSync(template) && existsSync(image));
}

module.exports = async function globalSetup() {
  // What this run made, for global-teardown.js (the two share this realm, not the workers).
  globalThis.svcTestMade = {};
  if (madeByEnclosingRun()) return;
  memoryTmpdir();
  await Promise.all([pgliteTemplate(), database()]);
  globalThis.svcTestMade = {
    template: process.env.SVC_TEST_PGLITE_TEMPLATE,
    memory: process.env.SVC_TEST_MEMORY_TMPDIR,
    database: process.env.SVC_TEST_CREATED_DATABASE,
  };
};
