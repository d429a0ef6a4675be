/**
 * README commands name files of this repo (`scenarios/…`, `examples/llmlb.yaml`) and npm scripts:
 * each must exist, so a newcomer's first copy-paste works. A file is a repo path when its first
 * folder is one of the repo's, or it is the input file of a command (`--config`, `--scenario`, or
 * the argument of serve/simulate/bench/train); other names (`traces/llmlb.jsonl`, `--out DIR`) are
 * the reader's own.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';

const readme = readFileSync('README.md', 'utf8');
const scripts = (JSON.parse(readFileSync('package.json', 'utf8')) as { scripts: Record<string, string> })
  .scripts;
// The repo's own folders (tracked files), not outputs a run left in the checkout (out/, bench-out/).
const topDirs = new Set(
  execFileSync('git', ['ls-files'], { encoding: 'utf8' })
    .split('\n')
    .filter((f) => f.includes('/') && !f.startsWith('.'))
    .map((f) => f.split('/')[0]!),
);

/** The command lines of the README's sh blocks (a trailing `\` joins the next line). */
function commandLines(text: string): string[] {
  const out: string[] = [];
  for (const block of text.matchAll(/^```(?:sh|bash|shell)\n([\s\S]*?)^```/gm)) {
    const joined = block[1]!.replace(/\\\n/g, ' ');
    for (const line of joined.split('\n')) {
      const cmd = line.replace(/\s#.*$/, '').trim();
      if (cmd !== '' && !cmd.startsWith('#')) out.push(cmd);
    }
  }
  return out;
}

/** Repo paths a command line names, and npm scripts it runs. */
export function namedPaths(line: string): { paths: string[]; scripts: string[] } {
  const paths: string[] = [];
  const runs: string[] = [];
  for (const cmd of line.split(/&&|\|\||;|\|/).map((c) => c.trim())) {
    const words = cmd.split(/\s+/).filter((w) => !/^[[\]]/.test(w) && !/[[\]]$/.test(w));
    const run = /^npm run (\S+)/.exec(cmd);
    if (run) runs.push(run[1]!);
    const start = /^npm start\b/.test(cmd) ? ['start'] : [];
    runs.push(...start);
    const llmlb = words[0] === 'llmlb' ? 1 : words[0] === 'npx' && words[1] === 'llmlb' ? 2 : -1;
    const sub = llmlb > 0 ? words[llmlb] : undefined;
    words.forEach((w, i) => {
      const prev = words[i - 1];
      const isInput =
        prev === '--config' ||
        prev === '--scenario' ||
        (i === llmlb + 1 &&
          ['serve', 'simulate', 'bench', 'train'].includes(sub ?? '') &&
          !w.startsWith('-'));
      const inRepoDir = /^[\w.-]+\/\S/.test(w) && topDirs.has(w.split('/')[0]!) && !w.includes('://');
      if (isInput || inRepoDir) paths.push(w.replace(/[`'",)]+$/, ''));
    });
  }
  return { paths, scripts: runs };
}

test('the path rules: repo folders and input files count, the reader’s own files do not', () => {
  assert.deepEqual(namedPaths('npx llmlb serve --config llmlb.yaml [--port P]').paths, ['llmlb.yaml']);
  assert.deepEqual(namedPaths('llmlb simulate scenarios/x.yaml --out out/sim').paths, ['scenarios/x.yaml']);
  assert.deepEqual(namedPaths('llmlb whatif traces/t.jsonl --config examples/llmlb.yaml').paths, [
    'examples/llmlb.yaml',
  ]);
  assert.deepEqual(namedPaths('npm ci && npm start').scripts, ['start']);
  assert.deepEqual(namedPaths('npm run bench:sim -- --x').scripts, ['bench:sim']);
});

test('every repo path and npm script a README command names exists', () => {
  const lines = commandLines(readme);
  assert.ok(lines.length > 20, 'the README has its command blocks');
  const missing: string[] = [];
  let checked = 0;
  for (const line of lines) {
    const named = namedPaths(line);
    for (const p of named.paths) {
      checked++;
      if (!existsSync(p)) missing.push(`${p}  (in: ${line})`);
    }
    for (const s of named.scripts) if (!(s in scripts)) missing.push(`npm script ${s}  (in: ${line})`);
  }
  assert.ok(checked >= 5, `only ${checked} paths found`);
  assert.deepEqual(missing, []);
});
