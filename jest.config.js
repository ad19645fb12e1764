/** @type {import('jest').Config} */
const swc = {
  jsc: {
    parser: { syntax: 'typescript', decorators: true },
    transform: { legacyDecorator: true, decoratorMetadata: true },
    target: 'es2022',
  },
  module: { type: 'commonjs' },
  sourceMaps: 'inline',
};
module.exports = {
  testEnvironment: 'node',
  // The libraries' path aliases (tsconfig.json "paths"): @svc/<lib> is libs/<lib>/src.
  moduleNameMapper: {
    '^@svc/([^/]+)$': '<rootDir>/libs/$1/src',
    '^@svc/([^/]+)/(.*)$': '<rootDir>/libs/$1/src/$2',
    // Nest's FileTypeValidator (the audio check of spec 4.10) imports file-type, whose exports
    // offer ESM only: jest's CommonJS resolver finds no entry, so it is given Node's.
    '^file-type$': require.resolve('file-type', { paths: [require('node:path').dirname(require.resolve('@nestjs/common/package.json'))] }),
  },
  rootDir: '.',
  roots: ['<rootDir>/libs', '<rootDir>/apps', '<rootDir>/src', '<rootDir>/test'],
  testMatch: ['**/*.spec.ts', '**/*.e2e.ts'],
  transform: { '^.+\\.(t|j)s$': ['@swc/jest', swc] },
  // NestJS 12 and a few of its dependencies ship ESM only; jest's loader must transform them.
  transformIgnorePatterns: [
    '/node_modules/(?!(@nestjs|uid|file-type|strtok3|token-types|uint8array-extras|@borewit|@tokenizer|load-esm|@standard-schema|cookie|set-cookie-parser|toad-cache|hyparquet|hyparquet-writer)/)',
  ],
  // The slowest suites first, on a machine that has not timed them yet too.
  testSequencer: '<rootDir>/test/support/slowest-first.js',
  globalSetup: '<rootDir>/test/support/global-setup.js',
  globalTeardown: '<rootDir>/test/support/global-teardown.js',
  testTimeout: 30000,
};
