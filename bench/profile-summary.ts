/**
 * Summarize a V8 .cpuprofile (from `node --cpu-prof`, e.g. BENCH_CPU_PROF=dir npm run bench:proxy):
 * self time by function and by file, and inclusive time of the functions in files matching a filter.
 * Usage: tsx bench/profile-summary.ts FILE.cpuprofile [top=30] [filter=src/]
 */
import { readFileSync } from 'node:fs';

interface CallFrame {
  readonly functionName: string;
  readonly url: string;
  readonly lineNumber: number;
}
interface ProfileNode {
  readonly id: number;
  readonly callFrame: CallFrame;
  readonly children?: readonly number[];
  /** Samples per source line (1-based) while this node was on top of the stack. */
  readonly positionTicks?: readonly { readonly line: number; readonly ticks: number }[];
}
interface Profile {
  readonly nodes: readonly ProfileNode[];
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
}

const [file, topArg, filterArg] = process.argv.slice(2);
if (!file) {
  console.error('usage: tsx bench/profile-summary.ts FILE.cpuprofile [top] [filter]');
  process.exit(2);
}
const top = Number(topArg ?? '30');
const filter = filterArg ?? '/src/';
const prof = JSON.parse(readFileSync(file, 'utf8')) as Profile;

const byId = new Map(prof.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of prof.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

const self = new Map<number, number>();
let total = 0;
prof.samples.forEach((id, i) => {
  const dt = prof.timeDeltas[i] ?? 0;
  total += dt;
  self.set(id, (self.get(id) ?? 0) + dt);
});

const short = (url: string): string =>
  url.replace(/^file:\/\/.*?\/(node_modules|src|bench)\//, '$1/') || '(native)';
const key = (f: CallFrame): string =>
  `${f.functionName || '(anonymous)'} ${short(f.url)}:${f.lineNumber + 1}`;

const selfByFn = new Map<string, number>();
const selfByFile = new Map<string, number>();
const inclusive = new Map<string, number>();
for (const [id, t] of self) {
  const n = byId.get(id)!;
  selfByFn.set(key(n.callFrame), (selfByFn.get(key(n.callFrame)) ?? 0) + t);
  const fileKey = short(n.callFrame.url).replace(/^(node_modules\/(@[^/]+\/)?[^/]+)\/.*/, '$1');
  selfByFile.set(fileKey, (selfByFile.get(fileKey) ?? 0) + t);
  // Inclusive: charge every distinct frame on the stack once.
  const seen = new Set<string>();
  for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
    const f = byId.get(cur)!.callFrame;
    if (!f.url.includes(filter)) continue;
    const k = key(f);
    if (seen.has(k)) continue;
    seen.add(k);
    inclusive.set(k, (inclusive.get(k) ?? 0) + t);
  }
}

// Self samples by source line, for frames in matching files: what to look at in the code.
const byLine = new Map<string, number>();
for (const n of prof.nodes) {
  if (!n.callFrame.url.includes(filter)) continue;
  for (const p of n.positionTicks ?? []) {
    const k = `${short(n.callFrame.url)}:${p.line} (${n.callFrame.functionName || 'anonymous'})`;
    byLine.set(k, (byLine.get(k) ?? 0) + p.ticks);
  }
}
const usPerSample = total / Math.max(1, prof.samples.length);

const show = (title: string, m: Map<string, number>, n: number): void => {
  console.log(`\n${title}`);
  for (const [k, t] of [...m].sort((a, b) => b[1] - a[1]).slice(0, n))
    console.log(
      `${((100 * t) / total).toFixed(1).padStart(5)}%  ${(t / 1000).toFixed(0).padStart(6)} ms  ${k}`,
    );
};
console.log(`${file}: ${(total / 1e6).toFixed(1)} s sampled`);
show('Self time by file/package', selfByFile, top);
show('Self time by function', selfByFn, top);
show(`Inclusive time, frames in '${filter}'`, inclusive, top);
show(
  `Self time by line, frames in '${filter}' (compiled JS lines)`,
  new Map([...byLine].map(([k, ticks]) => [k, ticks * usPerSample])),
  top,
);
