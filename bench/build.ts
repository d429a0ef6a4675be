/**
 * Compiles src/ and the benchmark's child scripts to plain JavaScript for the child processes,
 * the way `npm run build` would (TypeScript, ES2022, ESM), minus type checking. The children
 * then run on bare `node`: no tsx loader thread, no esbuild `keepNames` wrappers on every
 * closure, and CPU profiles whose line numbers match the source.
 */
import { spawnSync } from 'node:child_process';
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';
import ts from 'typescript';

async function tsFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...(await tsFiles(p)));
    else if (e.name.endsWith('.ts') && !e.name.endsWith('.d.ts') && !e.name.endsWith('.test.ts')) out.push(p);
  }
  return out;
}

const ASSET = /\.(html|js|css|lua|sql|json)$/;

async function assetFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...(await assetFiles(p)));
    else if (ASSET.test(e.name)) out.push(p);
  }
  return out;
}

/** Transpile `root`/src and the bench children (with common.ts) into `outDir` (wiped first); returns the file count. */
export async function compileForBench(root: string, outDir: string): Promise<number> {
  await rm(outDir, { recursive: true, force: true });
  const bench = (await tsFiles(join(root, 'bench'))).filter((f) => /(-child|common)\.ts$/.test(f));
  const files = [...(await tsFiles(join(root, 'src'))), ...bench];
  const compilerOptions: ts.CompilerOptions = {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.ESNext,
    sourceMap: false,
    esModuleInterop: true,
  };
  for (const file of files) {
    const out = ts.transpileModule(await readFile(file, 'utf8'), { compilerOptions, fileName: file });
    const dest = join(outDir, relative(root, file)).replace(/\.ts$/, '.js');
    await mkdir(dirname(dest), { recursive: true });
    await writeFile(dest, out.outputText);
  }
  // Assets the code reads beside itself (dashboard page, Lua scripts, SQL migrations), as
  // scripts/copy-assets.mjs does for dist/.
  for (const file of await assetFiles(join(root, 'src'))) {
    const dest = join(outDir, relative(root, file));
    await mkdir(dirname(dest), { recursive: true });
    await writeFile(dest, await readFile(file));
  }
  // Inside the repository, so bare imports resolve to its node_modules; ESM like the sources.
  await writeFile(join(outDir, 'package.json'), '{ "type": "module" }\n');
  return files.length;
}

/**
 * Export git revision `rev`'s src/ and bench/ (of the repository at `root`) into `dir` (created
 * if missing), for BENCH_BASE: the base tree is compiled from there, as this one is.
 */
export async function exportRevision(root: string, rev: string, dir: string): Promise<void> {
  await mkdir(dir, { recursive: true });
  const archive = spawnSync('git', ['archive', '--format=tar', rev, 'src', 'bench'], {
    cwd: root,
    maxBuffer: 1 << 30,
  });
  if (archive.status !== 0)
    throw new Error(`BENCH_BASE=${rev}: git archive failed: ${archive.stderr.toString().trim()}`);
  const untar = spawnSync('tar', ['-x', '-C', dir], { input: archive.stdout });
  if (untar.status !== 0) throw new Error(`BENCH_BASE=${rev}: tar failed: ${untar.stderr.toString().trim()}`);
}
