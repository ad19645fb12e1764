/**
 * The boundaries between the bounded contexts (`libs/<name>`), the apps and the composition root
 * (`src/`), checked by `npm run depcruise` (part of `npm test`).
 *
 * Violations that the tree still has are listed in `.dependency-cruiser-known-violations.json`
 * and only those are let through (`--ignore-known`): a new one fails, and the list only shrinks
 * (`npm run depcruise:baseline` rewrites it after one is removed).
 */
const fs = require('node:fs');
const path = require('node:path');

/** `export const xDecider: Decider<...>` is how every aggregate of the domain declares itself. */
const DECLARES_DECIDER = /^export const \w+: Decider</m;

function sourceFiles(dir) {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const file = path.join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(file);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.spec.ts') ? [file] : [];
  });
}

const escapeRegExp = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const libsDir = path.join(__dirname, 'libs');
const deciders = fs
  .readdirSync(libsDir)
  .filter((lib) => fs.existsSync(path.join(libsDir, lib, 'src')))
  .flatMap((lib) => sourceFiles(path.join(libsDir, lib, 'src')))
  .filter((file) => DECLARES_DECIDER.test(fs.readFileSync(file, 'utf8')))
  .map((file) => path.relative(__dirname, file).split(path.sep).join('/'));

/**
 * The pure modules: the deciders (`decide`/`evolve` and what they are made of) and the workflows
 * that drive them through ports. Recognised as
 *  - a file that declares a decider; a decider declared in a folder of its own (`ledger/src/account/`,
 *    `identity/src/settings/`) makes that whole folder its (commands, events, state, decide);
 *  - a `runner.ts` beside a decider: the workers' side of that decider's workflow (batches, videos);
 *  - any `workflow.ts`, `*.workflow.ts`, `decider.ts` or `*.decider.ts` in a lib.
 */
const pureModules = [
  ...new Set([
    ...deciders.map((file) => {
      const dir = path.posix.dirname(file);
      return /^libs\/[^/]+\/src$/.test(dir) ? `^${escapeRegExp(file)}$` : `^${escapeRegExp(dir)}/`;
    }),
    ...deciders.filter((file) => /^libs\/[^/]+\/src\/[^/]+$/.test(file)).map((file) => `^${escapeRegExp(path.posix.dirname(file))}/runner\\.ts$`),
  ]),
  '^libs/[^/]+/src/.*(/|\\.)(workflow|decider)\\.ts$',
];

/** Specs, the e2e suite and the libraries' test helpers. */
const TEST_CODE = ['\\.spec\\.tsx?$', '^test/(support|e2e)/', '/testing/'];
const LIB_INDEX = '^libs/[^/]+/src/index\\.ts$';
const LIB_TESTING = '^libs/[^/]+/src/(testing|.+/testing)/';

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'Modules in a cycle cannot be understood, tested or moved one at a time; type-only imports count too (they still tie the contexts together).',
      from: {},
      to: { circular: true },
    },
    {
      name: 'lib-not-to-app',
      severity: 'error',
      comment: 'A library is used by the apps, never the reverse: what an app knows stays in the app.',
      from: { path: '^libs/' },
      to: { path: '^apps/' },
    },
    {
      name: 'lib-not-to-src',
      severity: 'error',
      comment: 'src/ is the composition root (the process, the runtime, the CLI): libraries never reach into it.',
      from: { path: '^libs/' },
      to: { path: '^src/' },
    },
    {
      name: 'app-not-to-other-app',
      severity: 'error',
      comment: 'Each app is deployed on its own: what two apps share belongs in a library.',
      from: { path: '^apps/([^/]+)/' },
      to: { path: '^apps/', pathNot: '^apps/$1/' },
    },
    {
      name: 'lib-only-through-index',
      severity: 'error',
      comment: 'Another library is used only through its index (`@svc/<lib>`): its files are its own to move, and its index says what it offers.',
      from: { path: '^(libs/[^/]+|apps|src|test|bench|scripts)/', pathNot: TEST_CODE },
      to: { path: '^libs/[^/]+/', pathNot: ['^$1/', LIB_INDEX] },
    },
    {
      name: 'lib-only-through-index-or-testing',
      severity: 'error',
      comment:
        "Tests may also use another library's `testing/` helpers (`@svc/<lib>/testing/...`), kept out of its index so that they never load in production.",
      from: { path: '^(libs/[^/]+|apps|src|test)/(support/|e2e/|.*(\\.spec\\.tsx?$|/testing/))' },
      to: { path: '^libs/[^/]+/', pathNot: ['^$1/', LIB_INDEX, LIB_TESTING] },
    },
    {
      name: 'testing-only-from-tests',
      severity: 'error',
      comment: 'Test helpers (fake servers, fixtures, throwaway databases) never load in production code.',
      from: { pathNot: TEST_CODE },
      to: { path: LIB_TESTING },
    },
    {
      name: 'lib-only-through-alias',
      severity: 'error',
      comment: 'Another library is named by its alias `@svc/<lib>`, never by a relative path that happens to reach it.',
      from: { path: '^(libs/[^/]+|apps|src|test)/' },
      to: { path: '^libs/[^/]+/', pathNot: '^$1/', dependencyTypesNot: ['aliased-tsconfig-paths', 'aliased-tsconfig', 'aliased'] },
    },
    {
      name: 'pure-no-infrastructure',
      severity: 'error',
      comment:
        'Deciders and workflows are plain functions over commands, events and ports: no framework, no HTTP server, no database or Redis client. ' +
        'Only direct imports are checked: a library index they import may re-export infrastructure that they do not use.',
      from: { path: pureModules },
      to: { path: '^node_modules/(@nestjs/|fastify/|@fastify/|pg/|pg-[^/]+/|@types/pg/|@electric-sql/pglite/|ioredis/)' },
    },
    {
      name: 'not-to-unresolvable',
      severity: 'error',
      comment: 'An import that does not resolve would slip past every rule above.',
      from: {},
      to: { couldNotResolve: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^(dist|coverage)/' },
    // Type-only imports are dependencies too (a cycle through a type is still a cycle).
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['require', 'node', 'default', 'types'],
      extensions: ['.ts', '.tsx', '.d.ts', '.js', '.mjs', '.cjs', '.json'],
    },
  },
};
