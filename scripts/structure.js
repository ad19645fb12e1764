/**
 * `npm run structure`: the figures that say how the code is laid out, to compare before and after
 * a restructuring. Production code only (no `*.spec.ts(x)`, no `test/`, no `testing/` helpers)
 * for the sizes; the dependency figures are dependency-cruiser's over apps, libs, src and test.
 * `--list` also names the files and functions past their limit.
 */
const { readdirSync, readFileSync } = require('node:fs');
const path = require('node:path');
const ts = require('typescript');
const { cruise } = require('./boundaries');

const ROOT = path.join(__dirname, '..');
const FILE_LIMIT = 400;
const FUNCTION_LIMIT = 80;

function sourceFiles(dir) {
  return readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const file = path.posix.join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'node_modules' || entry.name === 'testing' ? [] : sourceFiles(file);
    return /\.tsx?$/.test(entry.name) && !/\.spec\.tsx?$/.test(entry.name) && !entry.name.endsWith('.d.ts') ? [file] : [];
  });
}

const lineCount = (text) => text.split('\n').length - (text.endsWith('\n') ? 1 : 0);

/** Every function-like node with its name and length in lines (an outer function's lines include its inner ones'). */
function functionsOf(file, text) {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, file.endsWith('.tsx') ? ts.ScriptKind.TSX : ts.ScriptKind.TS);
  const found = [];
  const nameOf = (node) => {
    if (node.name) return node.name.getText(source);
    if (ts.isConstructorDeclaration(node)) return 'constructor';
    const parent = node.parent;
    if ((ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent)) && parent.name)
      return parent.name.getText(source);
    return '(anonymous)';
  };
  const visit = (node) => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body) {
      const start = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
      const end = source.getLineAndCharacterOfPosition(node.getEnd()).line;
      found.push({ file, name: nameOf(node), line: start + 1, lines: end - start + 1 });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

function figures() {
  const files = ['apps', 'libs', 'src'].flatMap(sourceFiles).map((file) => {
    const text = readFileSync(path.join(ROOT, file), 'utf8');
    return { file, text, lines: lineCount(text) };
  });
  const gatewayLines = files.filter((f) => f.file.startsWith('apps/gateway/') && f.file.endsWith('.ts')).reduce((sum, f) => sum + f.lines, 0);
  const bigFiles = files.filter((f) => f.lines > FILE_LIMIT).sort((a, b) => b.lines - a.lines);
  const longFunctions = files
    .flatMap((f) => functionsOf(f.file, f.text))
    .filter((fn) => fn.lines > FUNCTION_LIMIT)
    .sort((a, b) => b.lines - a.lines);

  const result = cruise();
  const violations = result.summary.violations;
  const cycles = violations.filter((v) => v.rule.name === 'no-circular');
  const deep = new Map();
  for (const m of result.modules) {
    const fromLib = /^libs\/([^/]+)\//.exec(m.source)?.[1];
    for (const d of m.dependencies) {
      const to = /^libs\/([^/]+)\/src\/(.+)$/.exec(d.resolved);
      if (to && to[1] !== fromLib && to[2] !== 'index.ts')
        deep.set(`${m.source} ${d.resolved}`, { from: m.source, to: d.resolved, testing: /(^|\/)testing\//.test(to[2]) });
    }
  }
  const byRule = {};
  for (const v of violations) byRule[v.rule.name] = (byRule[v.rule.name] ?? 0) + 1;

  return { files, gatewayLines, bigFiles, longFunctions, cycles, deep: [...deep.values()], byRule };
}

function main() {
  const { files, gatewayLines, bigFiles, longFunctions, cycles, deep, byRule } = figures();
  const deepTesting = deep.filter((d) => d.testing).length;
  const rows = [
    ['lines in apps/gateway (non-test .ts)', String(gatewayLines)],
    [`files over ${FILE_LIMIT} lines (of ${files.length} non-test)`, String(bigFiles.length)],
    [`functions over ${FUNCTION_LIMIT} lines (non-test)`, String(longFunctions.length)],
    ['import cycles (dependency-cruiser)', String(cycles.length)],
    ['deep imports into another lib (not its index)', `${deep.length} (${deepTesting} into its testing/ helpers)`],
    [
      'dependency rule violations',
      Object.keys(byRule).length === 0
        ? '0'
        : Object.entries(byRule)
            .map(([rule, n]) => `${rule} ${n}`)
            .join(', '),
    ],
  ];
  const width = Math.max(...rows.map(([label]) => label.length));
  console.log(`| ${'figure'.padEnd(width)} | value`);
  console.log(`| ${'-'.repeat(width)} | -----`);
  for (const [label, value] of rows) console.log(`| ${label.padEnd(width)} | ${value}`);

  if (process.argv.includes('--list')) {
    console.log(`\nfiles over ${FILE_LIMIT} lines:`);
    for (const f of bigFiles) console.log(`  ${String(f.lines).padStart(5)}  ${f.file}`);
    console.log(`\nfunctions over ${FUNCTION_LIMIT} lines:`);
    for (const fn of longFunctions) console.log(`  ${String(fn.lines).padStart(5)}  ${fn.file}:${fn.line} ${fn.name}`);
    console.log('\ncycles:');
    for (const c of cycles) console.log(`  ${[c.from, ...c.cycle.map((x) => x.name ?? x)].join(' → ')}`);
    console.log('\ndeep imports:');
    for (const d of deep) console.log(`  ${d.from} → ${d.to}`);
  }
}

main();
