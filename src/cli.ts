#!/usr/bin/env node
import { existsSync, readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { resolve } from 'node:path';
import { Command, InvalidArgumentError, CommanderError, Option } from 'commander';
import { ConfigError } from './config/load.js';
import type { EngineCommandOptions } from './commands/engine.js';
import { CommandError, UsageError } from './commands/usage-error.js';

function int(name: string, min = 0, max = Number.MAX_SAFE_INTEGER) {
  return (v: string): number => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < min || n > max) {
      throw new InvalidArgumentError(`${name} must be an integer in [${min}, ${max}]`);
    }
    return n;
  };
}

/** `--workers`: 1..256, or `auto` (one per core). */
function workersArg(v: string): number {
  if (v === 'auto') return availableParallelism();
  return int('--workers', 1, 256)(v);
}

function positive(name: string) {
  return (v: string): number => {
    const n = Number(v);
    if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError(`${name} must be a positive number`);
    return n;
  };
}

/** `--rate-scale 1,2,3,4` parsed (0, -1, abc, an empty list: a usage error, exit 2). */
async function rateScaleList(text: string | undefined): Promise<number[] | undefined> {
  if (text === undefined) return undefined;
  const { parseRateScales } = await import('./commands/load-sweep.js');
  return parseRateScales(text);
}

const RATE_SCALE_HELP =
  'load multiples, e.g. 1,2,3,4: every policy at every multiple of the workload, with a capacity table and chart (one value: one run at that load)';
const RATE_SCALE_NOTE = `
Load sweeps (--rate-scale, or the scenario's rateScales): ×k is k times the traffic over the same
durationS. Open-loop workloads (constant, poisson, bursty, bursts, task-mix) send at k× their rate
(the same requests, k× as many); closed-loop ones (multi-turn, tree-of-thought) run k× the clients
with the same think times; a trace (and heimdall's script) is replayed k× faster; a mix scales each
part by its own rule. A policy "holds" at ×k while it completes ≥ 99 % and its mean E2E stays
within 2× the best mean E2E at the lowest load swept.`;

const WHATIF_RATE_SCALE_NOTE = `
Load sweeps (--rate-scale 1,2,3,4): ×k replays the trace k× faster (the same requests, their
gaps ÷ k). A policy "holds" at ×k while it meets --slo; without one, while it
completes ≥ 99 % and its mean E2E stays within 2× the best mean E2E at the lowest load swept.`;

const collect = (v: string, prev: string[] | undefined): string[] => [...(prev ?? []), v];
const list = (v: string | undefined): string[] | undefined =>
  v
    ?.split(',')
    .map((s) => s.trim())
    .filter(Boolean);

/**
 * A command's file, given as its argument (`llmlb simulate FILE`) or by its option (`--scenario
 * FILE`): either, or both when they name the same file. A missing file is named here, once for
 * every command, before any module of the command loads.
 */
function theFile(
  cmd: string,
  flag: string,
  what: string,
  arg: string | undefined,
  opt: string | undefined,
): string {
  if (arg !== undefined && opt !== undefined && resolve(arg) !== resolve(opt))
    throw new UsageError(`${cmd}: two different files given, '${arg}' and ${flag} '${opt}'; give one`);
  const file = arg ?? opt;
  if (file === undefined) throw new UsageError(`${cmd} needs a file: llmlb ${cmd} FILE (or ${flag} FILE)`);
  if (!existsSync(file)) throw new UsageError(`${what} file not found: ${file}`);
  return file;
}

/** package.json is one level up from both src/cli.ts and dist/cli.js. */
const VERSION = (
  JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }
).version;

const program = new Command()
  .name('llmlb')
  .description('A load balancer for LLM inference fleets (Ollama and OpenAI APIs)')
  .version(VERSION, '-V, --version', 'print the version')
  .exitOverride()
  .showHelpAfterError();

program
  .command('serve')
  .description('run the router')
  .argument('[config]', 'YAML or JSON configuration (or --config)')
  .option('--config <file>', 'YAML or JSON configuration')
  .option('--host <host>', 'listen address (overrides server.host)')
  .option('--port <port>', 'listen port (overrides server.port)', int('--port', 0, 65535))
  .option(
    '--workers <n>',
    'router processes sharing the port and one view of the fleet (node:cluster); auto = one per core',
    workersArg,
  )
  .action(
    async (
      file: string | undefined,
      o: { config?: string; host?: string; port?: number; workers?: number },
    ) => {
      const config = theFile('serve', '--config', 'config', file, o.config);
      // Each command loads only its own modules: `serve` starts without the simulator's charting stack.
      const { runServe } = await import('./commands/serve.js');
      await runServe({ ...o, config });
    },
  );

program
  .command('epp')
  .description('run the Gateway API endpoint picker (Envoy ext_proc v3 over gRPC)')
  .argument('[config]', 'YAML or JSON configuration (or --config)')
  .option('--config <file>', 'YAML or JSON configuration')
  .option('--host <host>', 'HTTP listen address for /metrics (overrides server.host)')
  .option('--port <port>', 'HTTP port for /metrics (overrides server.port)', int('--port', 0, 65535))
  .action(async (file: string | undefined, o: { config?: string; host?: string; port?: number }) => {
    const config = theFile('epp', '--config', 'config', file, o.config);
    const { runEpp } = await import('./commands/epp.js');
    await runEpp({ ...o, config });
  });

program
  .command('engine')
  .description('run an emulated inference server (Ollama and/or OpenAI API)')
  .requiredOption('--port <port>', 'listen port', int('--port', 0, 65535))
  .option('--host <host>', 'listen address', '127.0.0.1')
  .option('--api <api>', 'ollama | openai | both', 'both')
  .option('--model <name>', 'a model to serve (repeatable)', collect)
  .option('--slots <n>', 'sequences in the running batch', int('--slots', 1, 4096))
  .option('--kv <tokens>', 'KV-cache capacity in tokens', int('--kv', 1))
  .option('--speed <x>', 'hardware speed multiplier (1 = reference GPU)', positive('--speed'))
  .option('--time-scale <k>', 'model seconds per real second', positive('--time-scale'))
  .option('--seed <n>', 'seed for output lengths and text', int('--seed'))
  .option('--fail-rate <p>', 'fraction of requests answered 500', positive('--fail-rate'))
  .option('--lora <name>', 'a LoRA adapter served on the first --model (repeatable)', collect)
  .option('--max-lora <n>', 'LoRA adapter slots (vLLM --max-loras; default 4)', int('--max-lora', 1, 1024))
  .option('--lora-swap <s>', 'seconds to load an adapter into a slot (default 0.5)', positive('--lora-swap'))
  .action(async (o: EngineCommandOptions) => {
    const { startEngineCommand } = await import('./commands/engine.js');
    await startEngineCommand(o);
  });

program
  .command('demo')
  .description('three emulated engines of unequal speed behind the router, with a workload running')
  .option('--port <port>', 'router port', int('--port', 0, 65535), 8080)
  .option('--no-load', 'do not send a background workload')
  .option(
    '--regions <n>',
    'instead: n routers, one per region, forwarding to each other (2-5)',
    int('--regions', 2, 5),
  )
  .action(async (o: { port: number; load: boolean; regions?: number }) => {
    if (o.regions !== undefined) {
      const { runRegionsDemo } = await import('./commands/demo-regions.js');
      return runRegionsDemo({ port: o.port, load: o.load, regions: o.regions });
    }
    const { runDemo } = await import('./commands/demo.js');
    await runDemo(o);
  });

program
  .command('simulate')
  .description('run a scenario on virtual time with each policy and compare')
  .argument('[scenario]', 'scenario YAML (or --scenario)')
  .option('--scenario <file>', 'scenario YAML')
  .option('--policies <list>', "comma-separated policy names (default: the scenario's)")
  .option('--seed <n>', "seed (default: the scenario's)", int('--seed'))
  .option('--out <dir>', 'where results.json and charts go', 'out/simulate')
  .option(
    '--threads <n>',
    'worker threads for the runs (default 1; more pay off for long runs on many cores)',
    int('--threads', 1, 256),
  )
  .option('--rate-scale <list>', RATE_SCALE_HELP)
  .addHelpText('after', RATE_SCALE_NOTE)
  .action(
    async (
      file: string | undefined,
      o: {
        scenario?: string;
        policies?: string;
        seed?: number;
        out: string;
        threads?: number;
        rateScale?: string;
      },
    ) => {
      const scenarioPath = theFile('simulate', '--scenario', 'scenario', file, o.scenario);
      const rateScales = await rateScaleList(o.rateScale);
      const { runSimulateCommand } = await import('./commands/simulate.js');
      await runSimulateCommand({
        scenarioPath,
        policies: list(o.policies),
        seed: o.seed,
        outDir: o.out,
        threads: o.threads,
        rateScales,
      });
    },
  );

program
  .command('train')
  .description(
    "train the rl policy (the performance-aware router's Double DQN) on a scenario in the simulator",
  )
  .argument('[scenario]', 'scenario YAML (or --scenario)')
  .option('--scenario <file>', 'scenario YAML')
  .option('--episodes <n>', 'episodes', int('--episodes', 1, 100000), 20)
  .option('--seed <n>', "seed (default: the scenario's)", int('--seed'))
  .option('--requests <n>', "requests per episode (default: all the scenario's)", int('--requests', 1))
  .requiredOption('--out <file>', 'weights JSON (a learning-curve SVG is written beside it)')
  .addOption(
    new Option(
      '--redecide <mode>',
      'when held requests are decided again: when-fits, head (only the queue head: the performance-aware router), on-change, every-event',
    )
      .choices(['when-fits', 'head', 'on-change', 'every-event'])
      .default('when-fits'),
  )
  .action(
    async (
      file: string | undefined,
      o: {
        scenario?: string;
        episodes: number;
        seed?: number;
        requests?: number;
        out: string;
        redecide: 'when-fits' | 'head' | 'on-change' | 'every-event';
      },
    ) => {
      const scenarioPath = theFile('train', '--scenario', 'scenario', file, o.scenario);
      const { runTrainCommand } = await import('./commands/train.js');
      await runTrainCommand({
        scenarioPath,
        episodes: o.episodes,
        seed: o.seed,
        requests: o.requests,
        out: o.out,
        redecide: o.redecide,
      });
    },
  );

program
  .command('bench')
  .description('run a scenario live: emulated engines (time-scaled) behind a fresh router per policy')
  .argument('[scenario]', 'scenario YAML (or --scenario)')
  .option('--scenario <file>', 'scenario YAML')
  .option('--policies <list>', "comma-separated policy names (default: the scenario's)")
  .option('--seed <n>', "seed (default: the scenario's)", int('--seed'))
  .option(
    '--time-scale <k>',
    "model seconds per real second (default: the scenario's timeScale)",
    positive('--time-scale'),
  )
  .option('--out <dir>', 'where results.json and charts go', 'out/bench')
  .action(
    async (
      file: string | undefined,
      o: { scenario?: string; policies?: string; seed?: number; timeScale?: number; out: string },
    ) => {
      const scenarioPath = theFile('bench', '--scenario', 'scenario', file, o.scenario);
      const { runBenchCommand } = await import('./commands/bench.js');
      await runBenchCommand({
        scenarioPath,
        policies: list(o.policies),
        seed: o.seed,
        timeScale: o.timeScale,
        outDir: o.out,
      });
    },
  );

program
  .command('whatif')
  .description("replay a trace on the config's fleet under every policy and replica count; recommend one")
  .argument('[trace]', 'trace file (or --trace)')
  .option('--trace <file>', 'trace file (llmlb capture, Mooncake JSONL, Azure or BurstGPT CSV)')
  .option('--format <f>', 'llmlb | mooncake | azure | burstgpt (default: guessed from the file)')
  .requiredOption(
    '--config <file>',
    'router config (its backends are the fleet, its policy is compared first)',
  )
  .option('--replicas <list>', "comma-separated replica counts (default: the config's backend count)")
  .option(
    '--policies <list>',
    'comma-separated policy names (default: the built-ins of WHATIF_POLICIES; any registered name)',
  )
  .option('--slo <terms>', 'target to size for, e.g. ttft-p90=2s or ttft-p90=2s,e2e-p99=60s')
  .option('--profile <file>', 'engine profile (llmlb profile output; default: the built-in one)')
  .option(
    '--rate-scale <list>',
    'replay k× faster; a list (1,2,3,4) sweeps the loads: every policy and replica count at each, with capacity curves',
  )
  .addHelpText('after', WHATIF_RATE_SCALE_NOTE)
  .option('--limit <n>', 'replay the first n requests', int('--limit', 1))
  .option('--skip-bad', 'skip malformed trace lines (counted) instead of failing')
  .option('--seed <n>', 'seed', int('--seed'))
  .option('--threads <n>', 'worker threads (default: one per core)', int('--threads', 1, 256))
  .option('--out <dir>', 'where results.json and charts go', 'out/whatif')
  .action(async (file: string | undefined, o: Record<string, string | number | boolean | undefined>) => {
    const tracePath = theFile('whatif', '--trace', 'trace', file, o.trace as string | undefined);
    const { runWhatifCommand } = await import('./commands/whatif.js');
    const format = o.format as string | undefined;
    if (format !== undefined && !['llmlb', 'mooncake', 'azure', 'burstgpt'].includes(format))
      throw new UsageError(`--format must be llmlb, mooncake, azure or burstgpt, got '${format}'`);
    const rateScales = await rateScaleList(o.rateScale as string | undefined);
    const replicas = list(o.replicas as string | undefined)?.map(Number);
    if (replicas?.some((r) => !Number.isInteger(r) || r < 1))
      throw new UsageError('--replicas must list positive integers, e.g. 4,8,16');
    await runWhatifCommand({
      tracePath,
      format: format as 'llmlb' | 'mooncake' | 'azure' | 'burstgpt' | undefined,
      configPath: o.config as string,
      replicas,
      policies: list(o.policies as string | undefined),
      slo: o.slo as string | undefined,
      profilePath: o.profile as string | undefined,
      rateScales,
      limit: o.limit as number | undefined,
      skipBad: o.skipBad === true,
      seed: o.seed as number | undefined,
      threads: o.threads as number | undefined,
      outDir: o.out as string,
    });
  });

program
  .command('profile')
  .description(
    'measure an engine profile (for simulate and whatif --profile) from a live backend or a capture',
  )
  .option('--backend <url>', 'probe this backend (about 20 requests)')
  .option('--model <name>', 'model to probe')
  .option('--api <api>', 'ollama | openai', 'ollama')
  .option('--trace <file>', 'instead: derive per-backend profiles from an llmlb capture')
  .option('--time-scale <k>', 'model seconds per real second of an emulated engine', positive('--time-scale'))
  .option('--out <file>', 'profile file to write', 'profile.yaml')
  .action(async (o: Record<string, string | number | undefined>) => {
    const { runProfileCommand } = await import('./commands/profile.js');
    await runProfileCommand({
      backend: o.backend as string | undefined,
      model: o.model as string | undefined,
      api: o.api as string | undefined,
      trace: o.trace as string | undefined,
      timeScale: o.timeScale as number | undefined,
      out: o.out as string,
    });
  });

// Traces to replay: generated prefix-heavy traffic (issue #30) in the Mooncake format.
const trace = program.command('trace').description('trace files for simulate, whatif and bench');
trace
  .command('generate')
  .description(
    'write a prefix-heavy trace (Mooncake JSONL): long shared documents, growing conversations, agent loops',
  )
  .option('--shape <shape>', 'documents | conversations | agents | mixed')
  .option('--rate <rps>', 'requests per second (default 4)', positive('--rate'))
  .option('--duration <s>', 'seconds of traffic (default 600)', positive('--duration'))
  .option('--seed <n>', 'seed (default 1)', int('--seed'))
  .option('--out <file>', 'file to write (default: stdout)')
  .action(async (o: { shape?: string; rate?: number; duration?: number; seed?: number; out?: string }) => {
    const { runTraceGenerate } = await import('./commands/trace-generate.js');
    runTraceGenerate({ shape: o.shape, rate: o.rate, durationS: o.duration, seed: o.seed, out: o.out });
  });

// Backlog solver (issue 7): a PostgreSQL task table drained through the admission API.
const tasks = program
  .command('tasks')
  .description('backlog solver: a PostgreSQL table of prompts, solved through the router');
const db = (c: Command): Command =>
  c
    .option('--database-url <url>', 'PostgreSQL server (default: embedded PGlite)')
    .option('--data-dir <dir>', 'PGlite data directory', '.llmlb/tasks-db')
    .option('--schema <name>', 'schema holding the tasks table', 'public');
db(tasks.command('migrate').description('create or upgrade the tasks table')).action(
  async (o: { databaseUrl?: string; dataDir: string; schema: string }) => {
    const { tasksMigrate } = await import('./commands/tasks.js');
    await tasksMigrate(o);
  },
);
db(tasks.command('add').description('insert prompts (safe while solvers run)'))
  .option('--prompt <text>', 'a prompt (repeatable)', collect)
  .option('--file <file>', 'JSON lines {"prompt","model"} or one prompt a line')
  .option('--model <name>', 'pin the tasks to a model (default: the router picks)')
  .action(
    async (o: {
      databaseUrl?: string;
      dataDir: string;
      schema: string;
      prompt?: string[];
      file?: string;
      model?: string;
    }) => {
      const { tasksAdd } = await import('./commands/tasks.js');
      await tasksAdd(o);
    },
  );
db(tasks.command('status').description('count tasks by status')).action(
  async (o: { databaseUrl?: string; dataDir: string; schema: string }) => {
    const { tasksStatus } = await import('./commands/tasks.js');
    await tasksStatus(o);
  },
);
db(tasks.command('run').description('solve tasks: claim, admit (/schedule), call the model, write answers'))
  .requiredOption('--router <url>', 'llmlb router (model calls and, by default, the admission API)')
  .option('--admission <url>', 'admission API base URL (default: --router)')
  .option(
    '--models-url <url>',
    "where model calls go (default: --router; a models backend for the quota-aware router's flow)",
  )
  .option('--no-admission', 'skip the admission API (no quotas); needs --model')
  .option('--model <name>', 'model for unpinned tasks when --no-admission')
  .option('--admin-token <token>', 'bearer token for the admission API')
  .option(
    '--max-workers <n>',
    'upper bound on workers; /advice picks the number below it',
    int('--max-workers', 1, 100000),
    64,
  )
  .option(
    '--visibility-ms <ms>',
    "claim lease; a crashed worker's tasks return after it",
    int('--visibility-ms', 100),
    60000,
  )
  .option('--max-attempts <n>', 'attempts before a task is dead-lettered', int('--max-attempts', 1), 5)
  .option(
    '--backoff-ms <ms>',
    'first retry delay (doubles per attempt, jittered)',
    int('--backoff-ms', 1),
    1000,
  )
  .option(
    '--estimated-output-tokens <n>',
    'answer tokens assumed when estimating',
    int('--estimated-output-tokens', 0),
    256,
  )
  .option('--max-tokens <n>', 'max_tokens sent with each prompt', int('--max-tokens', 1))
  .option('--drain', 'exit once nothing is queued or running')
  .option('--progress', 'print one JSON line per solved or failed task')
  .action(async (o: Record<string, unknown>) => {
    const { tasksRun } = await import('./commands/tasks.js');
    await tasksRun({
      ...(o as unknown as import('./commands/tasks.js').RunOptions),
      noAdmission: o.admission === false,
      admission: typeof o.admission === 'string' ? o.admission : undefined,
      drain: o.drain === true,
      progress: o.progress === true,
    });
  });

// The subcommand running, for `llmlb COMMAND: …` error lines.
let running = '';
program.hook('preAction', (_root, action) => {
  running =
    action.parent && action.parent !== program ? `${action.parent.name()} ${action.name()}` : action.name();
});

try {
  await program.parseAsync(process.argv);
} catch (err) {
  if (err instanceof CommanderError) {
    process.exit(err.exitCode === 0 ? 0 : 2);
  }
  if (err instanceof ConfigError || err instanceof UsageError || isUsage(err)) {
    process.stderr.write(`llmlb: ${(err as Error).message}\n`);
    process.exit(2);
  }
  if (err instanceof CommandError) {
    process.stderr.write(`llmlb${running ? ` ${running}` : ''}: ${err.message}\n`);
    process.exit(1);
  }
  process.stderr.write(`llmlb: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
}

function isUsage(err: unknown): boolean {
  return err instanceof Error && (err.name === 'UsageError' || err.name === 'ScenarioError');
}
