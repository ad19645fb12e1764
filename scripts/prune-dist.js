// Removes from dist/ what an incremental build leaves behind when a source file is moved or
// deleted: a stale `x.js` would otherwise shadow a new `x/index.js` and keep dead code loadable.
const { existsSync, readdirSync, rmSync } = require('node:fs');
const { join, relative } = require('node:path');

const root = join(__dirname, '..');
const dist = join(root, 'dist');

function prune(dir) {
  if (!existsSync(dir)) return;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      prune(path);
      if (readdirSync(path).length === 0) rmSync(path, { recursive: true });
    } else if (/\.js(\.map)?$/.test(entry.name)) {
      const source = join(root, relative(dist, path)).replace(/\.js(\.map)?$/, '.ts');
      if (!existsSync(source)) rmSync(path);
    }
  }
}

for (const top of ['apps', 'libs', 'src']) prune(join(dist, top));
