'use strict';
// Summarises a V8 .cpuprofile: self time by function, by file and by package/area.
// Usage: node profile-summary.js <file.cpuprofile> [app root] ['[fromUs,toUs]']  (prints JSON)
const fs = require('node:fs');

const SPECIAL = new Set(['(idle)', '(program)', '(garbage collector)', '(root)']);

/** A short place for a script URL: a package, a gateway source file, or a node internal. */
function place(url, appRoot) {
  if (!url) return '';
  let u = url.replace(/^file:\/\//, '');
  const nm = u.lastIndexOf('/node_modules/');
  if (nm >= 0) return u.slice(nm + 1);
  if (appRoot && u.startsWith(appRoot)) u = u.slice(appRoot.length).replace(/^\//, '');
  return u;
}

/** The area a file belongs to: an npm package, a gateway folder, node internals, or V8's own. */
function area(file, fn) {
  if (!file) return SPECIAL.has(fn) ? fn : '(native / V8 builtins)';
  const m = /^node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(file);
  if (m) return `npm:${m[1]}`;
  if (file.startsWith('node:internal/deps/')) return `node:${file.slice(5).split('/').slice(0, 3).join('/')}`; // e.g. undici behind fetch()
  if (file.startsWith('node:')) return `node:${file.slice(5).split('/').slice(0, 2).join('/')}`;
  const d = /^dist\/((?:apps|libs)\/[^/]+|src)/.exec(file);
  if (d) return `gateway:${d[1]}`;
  return file;
}

/**
 * `window` ([from, to] in CLOCK_MONOTONIC microseconds, the clock of the profile's timestamps)
 * keeps only the samples taken inside it: the load, without start-up and shutdown.
 */
function summarize(profilePath, appRoot, top = 15, window = null) {
  const profile = JSON.parse(fs.readFileSync(profilePath, 'utf8'));
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const selfUs = new Map();
  const { samples, timeDeltas } = profile;
  let t = profile.startTime;
  let kept = 0;
  for (let i = 0; i < samples.length; i++) {
    t += timeDeltas[i];
    if (window && (t < window[0] || t > window[1])) continue;
    kept++;
    // timeDeltas[i] is the gap before sample i; the time after a sample is spent where it was.
    const dt = i + 1 < timeDeltas.length ? timeDeltas[i + 1] : 0;
    selfUs.set(samples[i], (selfUs.get(samples[i]) ?? 0) + Math.max(0, dt));
  }
  if (window && kept === 0) throw new Error(`no profile sample inside the window ${window} (profile ${profile.startTime}..${profile.endTime})`);
  const fns = new Map();
  const files = new Map();
  const areas = new Map();
  let total = 0;
  let idle = 0;
  for (const [id, us] of selfUs) {
    const { functionName, url, lineNumber } = byId.get(id).callFrame;
    const name = functionName || '(anonymous)';
    total += us;
    if (name === '(idle)') {
      idle += us;
      continue;
    }
    const file = place(url, appRoot);
    const fnKey = `${name}\t${file}\t${file ? lineNumber + 1 : ''}`;
    fns.set(fnKey, (fns.get(fnKey) ?? 0) + us);
    const fileKey = file || name;
    files.set(fileKey, (files.get(fileKey) ?? 0) + us);
    const a = area(file, name);
    areas.set(a, (areas.get(a) ?? 0) + us);
  }
  const busy = total - idle;
  const rank = (m, n, f) =>
    [...m.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, n)
      .map(([k, us]) => ({
        ...f(k),
        self_ms: +(us / 1000).toFixed(1),
        pct_busy: +((100 * us) / busy).toFixed(2),
        pct_total: +((100 * us) / total).toFixed(2),
      }));
  return {
    window_us: window,
    samples: kept,
    sampled_ms: +(total / 1000).toFixed(1),
    idle_ms: +(idle / 1000).toFixed(1),
    busy_ms: +(busy / 1000).toFixed(1),
    top_functions: rank(fns, top, (k) => {
      const [fn, file, line] = k.split('\t');
      return { function: fn, file: file || '(V8/native)', line: line ? Number(line) : null };
    }),
    top_files: rank(files, top, (k) => ({ file: k })),
    by_area: rank(areas, top, (k) => ({ area: k })),
  };
}

module.exports = { summarize };

if (require.main === module) {
  const window = process.argv[4] ? JSON.parse(process.argv[4]) : null;
  console.log(JSON.stringify(summarize(process.argv[2], process.argv[3], 15, window), null, 2));
}
