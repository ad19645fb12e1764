// `npm test`: builds what changed, then runs jest while the formatting, lint, dependency rules and
// typecheck run beside it. Jest needs the build (its suites start the built server and workers)
// but not the checks, and its two workers leave a quarter of the two cores idle while their
// suites wait on their processes: the checks (about 110 s of CPU) fill that at a lower priority,
// instead of taking a minute before the first suite starts. Their output is printed after
// jest's, whole; the exit status is a failure if either failed. Arguments go to jest.
const { spawn, spawnSync } = require('node:child_process');
const { join } = require('node:path');

const root = join(__dirname, '..');

const built = spawnSync('npm', ['run', '--silent', 'build:if-changed'], { cwd: root, stdio: 'inherit' });
if (built.status !== 0) process.exit(built.status ?? 1);

/** Resolves with the exit status (a signal counts as a failure). */
const exited = (child) => new Promise((resolve) => child.on('close', (code) => resolve(code ?? 1)));

const checks = spawn('nice', ['-n', '10', 'npm', 'run', '--silent', 'checks:all'], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
let checksOutput = '';
checks.stdout.on('data', (d) => (checksOutput += d));
checks.stderr.on('data', (d) => (checksOutput += d));

const jest = spawn(
  process.execPath,
  [
    '--experimental-vm-modules',
    '--no-warnings=ExperimentalWarning',
    join(root, 'node_modules', 'jest', 'bin', 'jest.js'),
    '--maxWorkers=2',
    '--workerIdleMemoryLimit=1500MB',
    ...process.argv.slice(2),
  ],
  { cwd: root, stdio: 'inherit' },
);

Promise.all([exited(jest), exited(checks)]).then(([jestStatus, checksStatus]) => {
  process.stdout.write(`\n${checksOutput}`);
  console.log(checksStatus === 0 ? 'svc-gateway: formatting, lint, dependency rules and typecheck passed' : 'svc-gateway: the checks above FAILED');
  process.exit(jestStatus !== 0 ? jestStatus : checksStatus);
});
