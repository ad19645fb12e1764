/**
 * `npm run depcruise` (part of `npm test`): the dependency rules of .dependency-cruiser.cjs over
 * apps, libs, src and test. Fails on a violation that is not in the known list
 * (.dependency-cruiser-known-violations.json), and on a known one that is gone, so that the list
 * only shrinks: `npm run depcruise:baseline` rewrites it once one has been removed.
 */
const { execFileSync } = require('node:child_process');
const { existsSync, readFileSync } = require('node:fs');
const path = require('node:path');

const ROOT = path.join(__dirname, '..');
const KNOWN = path.join(ROOT, '.dependency-cruiser-known-violations.json');
const SCOPE = ['apps', 'libs', 'src', 'test'];

/** The whole cruise (modules, dependencies, every violation, known or not) as dependency-cruiser's JSON. */
function cruise() {
  const bin = path.join(ROOT, 'node_modules', 'dependency-cruiser', 'bin', 'dependency-cruise.mjs');
  const out = execFileSync(process.execPath, [bin, '--output-type', 'json', ...SCOPE], { cwd: ROOT, maxBuffer: 512 * 1024 * 1024, encoding: 'utf8' });
  return JSON.parse(out);
}

/** What tells two reports of one violation apart: as dependency-cruiser's own --ignore-known matches them. */
function keyOf(v) {
  return JSON.stringify([v.type, v.rule.name, v.from, v.to, (v.cycle ?? []).map((c) => c.name ?? c)]);
}

function describe(v) {
  const via = v.cycle ? ` (cycle: ${[v.from, ...v.cycle.map((c) => c.name ?? c)].join(' → ')})` : '';
  return `${v.rule.name}: ${v.from} → ${v.to}${via}`;
}

function check() {
  const result = cruise();
  const violations = result.summary.violations.filter((v) => v.rule.severity === 'error');
  const known = existsSync(KNOWN) ? JSON.parse(readFileSync(KNOWN, 'utf8')) : [];
  const knownKeys = new Set(known.map(keyOf));
  const currentKeys = new Set(violations.map(keyOf));
  const added = violations.filter((v) => !knownKeys.has(keyOf(v)));
  const gone = known.filter((v) => !currentKeys.has(keyOf(v)));

  for (const v of added) console.error(`  error ${describe(v)}`);
  for (const v of gone) console.error(`  gone  ${describe(v)}`);
  if (added.length > 0) console.error(`\n${added.length} new dependency violation(s): see the rule's comment in .dependency-cruiser.cjs.`);
  if (gone.length > 0) console.error(`\n${gone.length} known violation(s) no longer there: run \`npm run depcruise:baseline\` so that the known list shrinks.`);

  const byRule = {};
  for (const v of violations) byRule[v.rule.name] = (byRule[v.rule.name] ?? 0) + 1;
  const left = Object.entries(byRule)
    .map(([rule, n]) => `${rule} ${n}`)
    .join(', ');
  console.log(
    `dependency rules: ${result.summary.totalCruised} modules, ${result.summary.totalDependenciesCruised} dependencies; ` +
      `${added.length} new violation(s), ${violations.length - added.length} known left${left ? ` (${left})` : ''}.`,
  );
  return added.length === 0 && gone.length === 0;
}

module.exports = { cruise };

if (require.main === module) process.exit(check() ? 0 : 1);
