/**
 * `llmlb profile`: engine profiles (src/engine/types.ts EngineProfile) from reality, for the
 * simulator and `llmlb whatif --profile`.
 *
 * - `--backend URL --model M`: a short, bounded probe of a live backend (about 20 requests):
 *   prefill seconds per token from prompts of growing length (one output token each); the decode
 *   step's cost per context token from a long and a short prompt decoding alone; its base and
 *   per-sequence cost from 1, 2, 4, 8 concurrent decodes; the most useful concurrency, where
 *   throughput stops growing (the engine's slots, as far as routing is concerned). Ollama reports
 *   prefill and decode durations itself; over the OpenAI API they are timed from the stream.
 * - `--trace capture.jsonl`: per-backend profiles from what `serve` captured: TTFT against prompt
 *   length gives prefill, decode time per token against the requests decoding beside it on the
 *   same backend gives the step's base and per-sequence cost.
 *
 * The engine model these fit (design §3): an iteration costs base + perSeq·running +
 * perToken·context (+ prefillPerToken·prompt for the one admitting a prompt), so every quantity
 * below is linear in what the probe varies. Written with speed 1: the constants are absolute.
 *
 * The probe is src/fleet/probe.ts, the fits src/engine/profile-fit.ts; this file reads the flags,
 * prints and writes the profile file.
 */
import { writeFileSync } from 'node:fs';
import { stringify } from 'yaml';
import type { MeasuredConstants } from '../engine/profile-fit.js';
import { profilesFromTrace } from '../engine/profile-fit.js';
import {
  BackendCheckError,
  checkBackend as checkFleetBackend,
  probeBackend,
  unreachableReason,
  type ProbeApi,
  type ProbeResult,
} from '../fleet/probe.js';
import { CommandError, UsageError } from './usage-error.js';

/**
 * Before probing: the backend answers, over the API given, and has the model. Otherwise a
 * CommandError of one line (src/fleet/probe.ts checkBackend).
 */
export async function checkBackend(
  backend: string,
  model: string,
  api: ProbeApi,
  timeoutMs?: number,
): Promise<void> {
  try {
    await checkFleetBackend(backend, model, api, timeoutMs);
  } catch (e) {
    if (e instanceof BackendCheckError) throw new CommandError(e.message);
    throw e;
  }
}

export interface ProfileCommandOptions {
  readonly backend?: string | undefined;
  readonly model?: string | undefined;
  readonly trace?: string | undefined;
  readonly api?: string | undefined;
  readonly out?: string | undefined;
  readonly timeScale?: number | undefined;
  readonly quiet?: boolean;
}

const g4 = (x: number): string => Number(x.toPrecision(4)).toString();

function describe(p: MeasuredConstants): string {
  return (
    `slots ${p.slots}, base step ${g4(p.baseStepS * 1000)} ms, per sequence ${g4(p.perSeqS * 1e6)} µs, ` +
    `per context token ${g4(p.perTokenS * 1e9)} ns, prefill ${g4(p.prefillPerTokenS * 1e6)} µs/token`
  );
}

/** Rounded to 4 significant digits for the file. */
function rounded(p: MeasuredConstants): MeasuredConstants {
  const r = (x: number): number => Number(x.toPrecision(4));
  return {
    slots: p.slots,
    speed: 1,
    baseStepS: r(p.baseStepS),
    perSeqS: r(p.perSeqS),
    perTokenS: r(p.perTokenS),
    prefillPerTokenS: r(p.prefillPerTokenS),
  };
}

/** `llmlb profile`: probe a backend or read a capture, print the constants, write the profile file. */
export async function runProfileCommand(o: ProfileCommandOptions): Promise<void> {
  const outPath = o.out ?? 'profile.yaml';
  const say = (s: string): void => {
    if (!o.quiet) process.stdout.write(`${s}\n`);
  };
  if (o.trace !== undefined) {
    if (o.backend !== undefined) throw new UsageError('give --backend or --trace, not both');
    let per;
    try {
      per = await profilesFromTrace(o.trace);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT')
        throw new UsageError(`trace file not found: ${o.trace}`);
      throw new UsageError((e as Error).message);
    }
    if (per.size === 0)
      throw new UsageError(`${o.trace}: no successful request with a backend, TTFT and E2E`);
    // The fleet-wide profile whatif reads: the backends' median constants.
    const med = (f: (p: MeasuredConstants) => number): number => {
      const xs = [...per.values()].map((b) => f(b.profile)).sort((a, b) => a - b);
      return xs[Math.floor(xs.length / 2)]!;
    };
    const fleet: MeasuredConstants = {
      slots: med((p) => p.slots),
      speed: 1,
      baseStepS: med((p) => p.baseStepS),
      perSeqS: med((p) => p.perSeqS),
      perTokenS: 0,
      prefillPerTokenS: med((p) => p.prefillPerTokenS),
    };
    for (const [name, b] of per) say(`${name} (${b.requests} requests): ${describe(b.profile)}`);
    const doc = {
      profile: rounded(fleet),
      source: { trace: o.trace, note: 'median over backends; per-backend constants below' },
      backends: Object.fromEntries(
        [...per].map(([name, b]) => [name, { requests: b.requests, ...rounded(b.profile) }]),
      ),
    };
    writeFileSync(outPath, stringify(doc));
    say(`wrote ${outPath}`);
    return;
  }
  if (o.backend === undefined || o.model === undefined)
    throw new UsageError('llmlb profile needs --backend URL and --model M (or --trace FILE)');
  const api = o.api ?? 'ollama';
  if (api !== 'ollama' && api !== 'openai')
    throw new UsageError(`--api must be ollama or openai, got '${api}'`);
  try {
    new URL(o.backend);
  } catch {
    throw new UsageError(`--backend: not a URL: ${o.backend}`);
  }
  await checkBackend(o.backend, o.model, api);
  say(`probing ${o.backend} (${api}, model ${o.model}): about 20 requests`);
  let r: ProbeResult;
  try {
    r = await probeBackend({
      backend: o.backend,
      model: o.model,
      api,
      ...(o.timeScale !== undefined ? { timeScale: o.timeScale } : {}),
    });
  } catch (err) {
    // Mid-probe: the server went away or answered an error (its message names the route and status).
    const e = err as Error;
    throw new CommandError(
      e.name === 'TypeError' || e.name === 'TimeoutError'
        ? `cannot reach ${o.backend}: ${unreachableReason(err)}`
        : e.message.replace(/\s*\n\s*/g, ' '),
    );
  }
  for (const p of r.prefill) say(`  prefill ${p.promptTokens} tokens: ${g4(p.seconds)} s`);
  for (const d of r.decode)
    say(`  decode x${d.concurrency}: step ${g4(d.stepS * 1000)} ms, ${g4(d.tokensPerS)} tokens/s`);
  say(`${describe(r.profile)} (${r.requests} requests, ${r.wallS.toFixed(1)} s)`);
  const doc = {
    profile: rounded(r.profile),
    source: {
      backend: o.backend,
      model: o.model,
      api,
      maxUsefulConcurrency: r.maxUsefulConcurrency,
      prefill: r.prefill,
      decode: r.decode,
    },
  };
  writeFileSync(outPath, stringify(doc));
  say(`wrote ${outPath}`);
}
