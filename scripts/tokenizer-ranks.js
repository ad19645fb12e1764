// Writes the o200k_base encoding's ranks as JSON beside the built token counting
// (libs/providers/src/tokens.ts reads it): gpt-tokenizer ships them as a 2.2 MB JavaScript
// module, and compiling that leaves a process 20-30 MB more resident memory than parsing the
// same array as JSON. `node scripts/tokenizer-ranks.js [file]`: the build's place by default.
const { mkdirSync, writeFileSync } = require('node:fs');
const { dirname, join } = require('node:path');

const out = process.argv[2] ?? join(__dirname, '..', 'dist', 'libs', 'providers', 'src', 'o200k_base.ranks.json');
const ranks = require('gpt-tokenizer/bpeRanks/o200k_base').default;
mkdirSync(dirname(out), { recursive: true });
writeFileSync(out, JSON.stringify(ranks));
