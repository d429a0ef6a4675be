// Node 20's test runner takes no globs: find the test files ourselves and hand them to it.
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';

const roots = process.argv.slice(2).filter((a) => !a.startsWith('-'));
const flags = process.argv.slice(2).filter((a) => a.startsWith('-'));
// bench/ holds the real-prefix bench's engine and GGUF tests (node-llama-cpp).
const dirs = roots.length > 0 ? roots : ['src', 'test', 'bench'];
const files = [];
function walk(p) {
  let st;
  try {
    st = statSync(p);
  } catch {
    return;
  }
  if (st.isDirectory()) {
    for (const e of readdirSync(p).sort()) if (e !== 'node_modules') walk(join(p, e));
  } else if (p.endsWith('.test.ts')) files.push(p);
}
for (const d of dirs) walk(d);
if (files.length === 0) {
  console.error('no test files found under', dirs.join(', '));
  process.exit(1);
}
// A hung test fails after 5 minutes instead of hanging CI (a flag given on the command line wins).
const timeout = flags.some((f) => f.startsWith('--test-timeout')) ? [] : ['--test-timeout=300000'];
const r = spawnSync(
  process.execPath,
  ['--import', 'tsx', '--test', '--test-reporter=spec', ...timeout, ...flags, ...files],
  { stdio: 'inherit' },
);
process.exit(r.status ?? 1);
