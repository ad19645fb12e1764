// ESLint over the whole tree (`npm run lint`, part of `npm test`): the recommended rules of
// ESLint and typescript-eslint, less those listed below with the reason each is off.
import js from '@eslint/js';
import reactHooks from 'eslint-plugin-react-hooks';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/', 'coverage/', '**/node_modules/', 'bench/results/'] },
  js.configs.recommended,
  tseslint.configs.recommended,
  {
    rules: {
      // Handlers share one signature (a decider's `(command, state, now)`, a Nest hook's
      // arguments) so that one table or switch calls them alike: an argument one of them does not
      // read is no defect. Unused variables and imports are still errors; `_name` marks one kept
      // on purpose (a field destructured away, a tuple position).
      '@typescript-eslint/no-unused-vars': [
        'error',
        { args: 'none', ignoreRestSiblings: true, varsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_', caughtErrors: 'none' },
      ],
      // `any` is written on purpose where untyped data enters: SQL rows (`Record<string, any>`)
      // mapped to typed records at once, and JSON bodies that tests poke at. About 120 places, none a defect.
      '@typescript-eslint/no-explicit-any': 'off',
      // Heavy optional modules (the EventStoreDB client, the OpenTelemetry SDK) are loaded with
      // `require()` on first use, so that processes not configured for them never load them.
      '@typescript-eslint/no-require-imports': 'off',
      // Fires on defensive initial values (`let body = null` before the `try` that sets it) and on
      // flags that a callback sets: nine places, none a defect.
      'no-useless-assignment': 'off',
      // The CLI and the benchmarks strip terminal escapes and control characters on purpose.
      'no-control-regex': 'off',
    },
  },
  {
    files: ['**/*.js', '**/*.cjs'],
    languageOptions: { sourceType: 'commonjs', globals: { ...globals.node } },
    // A script's own `const crypto = require('node:crypto')` names the module as Node's global does.
    rules: { 'no-redeclare': ['error', { builtinGlobals: false }] },
  },
  {
    files: ['bench/**'],
    // Stopping what a benchmark started is best effort: a process already gone is no failure.
    rules: { 'no-empty': ['error', { allowEmptyCatch: true }] },
  },
  {
    files: ['**/*.mjs', '**/*.mts'],
    languageOptions: { globals: { ...globals.node } },
  },
  {
    files: ['**/*.spec.ts', '**/*.spec.tsx', 'test/**'],
    rules: {
      // The simulations re-throw a failure with its seed and step in the message, the original's
      // message or stack included: the cause is already in what is printed.
      'preserve-caught-error': 'off',
    },
  },
  {
    files: ['apps/console/**/*.ts', 'apps/console/**/*.tsx'],
    languageOptions: { globals: { ...globals.browser } },
    plugins: { 'react-hooks': reactHooks },
    rules: {
      'react-hooks/rules-of-hooks': 'error',
      'react-hooks/exhaustive-deps': 'error',
    },
  },
);
