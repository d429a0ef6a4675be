#!/usr/bin/env node
// Compare two trees of simulator outputs (e.g. `llmlb simulate --out A/<scenario>` run before and
// after a refactor, and the same into B): every results.json under either directory, by relative
// path, is reported identical or differs. Wall/CPU-time fields, where a file has any, are removed
// before comparing (they change run to run; simulated results must not). Exit 0: all identical;
// 1: something differs or is missing; 2: usage.
//
//   node scripts/compare-sim-results.mjs DIR_A DIR_B [--all]
//
// --all compares every file (the SVG charts too), not only results.json; non-JSON files byte for byte.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

// Keys that hold a measured duration of the run itself, not a simulated figure.
const TIMING_KEY =
  /^(wall|cpu|elapsed)|(Wall|Cpu|Elapsed)(S|Ms)?$|^(generatedAt|timestamp|startedAt|finishedAt)$/;

const args = process.argv.slice(2);
const all = args.includes('--all');
const dirs = args.filter((a) => !a.startsWith('--'));
if (dirs.length !== 2 || args.some((a) => a.startsWith('--') && a !== '--all')) {
  console.error('usage: node scripts/compare-sim-results.mjs DIR_A DIR_B [--all]');
  process.exit(2);
}
for (const d of dirs) {
  if (!statSync(d, { throwIfNoEntry: false })?.isDirectory()) {
    console.error(`not a directory: ${d}`);
    process.exit(2);
  }
}

function walk(root, dir = root, out = new Set()) {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    // Symbolic links are followed (an output tree may link in another run's scenario folders).
    const st = e.isSymbolicLink() ? statSync(p, { throwIfNoEntry: false }) : e;
    if (st?.isDirectory()) walk(root, p, out);
    else if (st?.isFile() && (all || e.name === 'results.json')) out.add(relative(root, p));
  }
  return out;
}

let stripped = 0;
function stripTiming(v) {
  if (Array.isArray(v)) return v.map(stripTiming);
  if (v === null || typeof v !== 'object') return v;
  const o = Object.create(null);
  for (const [k, x] of Object.entries(v)) {
    if (TIMING_KEY.test(k)) stripped++;
    else o[k] = stripTiming(x);
  }
  return o;
}

/** Leaf-by-leaf differences (JSON path, a, b), at most `limit`. */
function diffs(a, b, path = '$', found = [], limit = 5) {
  if (found.length >= limit) return found;
  const ao = a !== null && typeof a === 'object';
  const bo = b !== null && typeof b === 'object';
  if (!ao || !bo || Array.isArray(a) !== Array.isArray(b)) {
    if (!Object.is(a, b)) found.push([path, a, b]);
    return found;
  }
  const keys = Array.isArray(a)
    ? Array.from({ length: Math.max(a.length, b.length) }, (_, i) => i)
    : [...new Set([...Object.keys(a), ...Object.keys(b)])];
  for (const k of keys) {
    const p = Array.isArray(a) ? `${path}[${k}]` : `${path}.${k}`;
    diffs(a[k], b[k], p, found, limit);
    if (found.length >= limit) break;
  }
  return found;
}

const show = (v) => (v === undefined ? '(absent)' : JSON.stringify(v));
const [dirA, dirB] = dirs;
const files = [...new Set([...walk(dirA), ...walk(dirB)])].sort();
let identical = 0;
let bad = 0;
for (const f of files) {
  const pa = join(dirA, f);
  const pb = join(dirB, f);
  const ea = statSync(pa, { throwIfNoEntry: false });
  const eb = statSync(pb, { throwIfNoEntry: false });
  if (!ea || !eb) {
    console.log(`${f}: missing in ${ea ? dirB : dirA}`);
    bad++;
    continue;
  }
  const ba = readFileSync(pa);
  const bb = readFileSync(pb);
  if (ba.equals(bb)) {
    console.log(`${f}: identical (byte for byte)`);
    identical++;
    continue;
  }
  if (!f.endsWith('.json')) {
    console.log(`${f}: differs (bytes)`);
    bad++;
    continue;
  }
  let ja;
  let jb;
  stripped = 0;
  try {
    ja = stripTiming(JSON.parse(ba.toString('utf8')));
    jb = stripTiming(JSON.parse(bb.toString('utf8')));
  } catch (err) {
    console.log(`${f}: differs (not both JSON: ${err.message})`);
    bad++;
    continue;
  }
  const d = diffs(ja, jb);
  if (d.length === 0) {
    // Equal values in other bytes: timing fields removed, or only key order / formatting differ.
    console.log(
      `${f}: identical (${stripped > 0 ? 'timing fields removed' : 'same values, other formatting'})`,
    );
    identical++;
    continue;
  }
  console.log(`${f}: differs`);
  for (const [p, a, b] of d) console.log(`  ${p}: ${show(a)} vs ${show(b)}`);
  bad++;
}
console.log(`${identical} identical, ${bad} differ or missing, of ${files.length} files`);
process.exit(bad === 0 && files.length > 0 ? 0 : 1);
