// `npm start`'s build: skipped when no input changed since the last complete build, whose end
// `npm run build` marks with dist/.build-complete. A no-op TypeScript build still loads and
// hashes the whole program (about 6 s here, several times that on a loaded machine), which is
// most of what `npm start` took right after a build.
const { existsSync, readdirSync, statSync } = require('node:fs');
const { join } = require('node:path');
const { spawnSync } = require('node:child_process');

const root = join(__dirname, '..');
const stamp = join(root, 'dist', '.build-complete');
const INPUTS = ['apps', 'libs', 'src', 'scripts', 'package.json', 'package-lock.json', 'tsconfig.json', 'tsconfig.build.json'];
const SKIP = new Set(['node_modules', 'dist', 'test-output']);

function newest(path) {
  const stat = statSync(path);
  if (!stat.isDirectory()) return stat.mtimeMs;
  let latest = stat.mtimeMs; // a deleted or renamed file changes its directory
  for (const entry of readdirSync(path, { withFileTypes: true })) {
    if (SKIP.has(entry.name)) continue;
    latest = Math.max(latest, newest(join(path, entry.name)));
  }
  return latest;
}

const built = existsSync(stamp) ? statSync(stamp).mtimeMs : -1;
const changed = built < 0 || INPUTS.some((input) => existsSync(join(root, input)) && newest(join(root, input)) > built);
if (!changed) {
  console.log('svc-gateway: the build is up to date');
  process.exit(0);
}
console.log('svc-gateway: compiling what changed since the last build...');
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
process.exit(spawnSync(npm, ['run', '--silent', 'build'], { cwd: root, stdio: 'inherit' }).status ?? 1);
