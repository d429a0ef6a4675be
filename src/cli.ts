#!/usr/bin/env node
import { Command, InvalidArgumentError, CommanderError } from 'commander';
import { ConfigError } from './config/load.js';
import type { EngineCommandOptions } from './commands/engine.js';
import { UsageError } from './commands/usage-error.js';

function int(name: string, min = 0, max = Number.MAX_SAFE_INTEGER) {
  return (v: string): number => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < min || n > max) {
      throw new InvalidArgumentError(`${name} must be an integer in [${min}, ${max}]`);
    }
    return n;
  };
}

function positive(name: string) {
  return (v: string): number => {
    const n = Number(v);
    if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError(`${name} must be a positive number`);
    return n;
  };
}

const collect = (v: string, prev: string[] | undefined): string[] => [...(prev ?? []), v];
const list = (v: string | undefined): string[] | undefined =>
  v
    ?.split(',')
    .map((s) => s.trim())
    .filter(Boolean);

const program = new Command()
  .name('llmlb')
  .description('A load balancer for LLM inference fleets (Ollama and OpenAI APIs)')
  .exitOverride()
  .showHelpAfterError();

program
  .command('serve')
  .description('run the router')
  .requiredOption('--config <file>', 'YAML or JSON configuration')
  .option('--host <host>', 'listen address (overrides server.host)')
  .option('--port <port>', 'listen port (overrides server.port)', int('--port', 0, 65535))
  .action(async (o: { config: string; host?: string; port?: number }) => {
    // Each command loads only its own modules: `serve` starts without the simulator's charting stack.
    const { runServe } = await import('./commands/serve.js');
    await runServe(o);
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
  .action(async (o: EngineCommandOptions) => {
    const { startEngineCommand } = await import('./commands/engine.js');
    await startEngineCommand(o);
  });

program
  .command('demo')
  .description('three emulated engines of unequal speed behind the router, with a workload running')
  .option('--port <port>', 'router port', int('--port', 0, 65535), 8080)
  .option('--no-load', 'do not send a background workload')
  .action(async (o: { port: number; load: boolean }) => {
    const { runDemo } = await import('./commands/demo.js');
    await runDemo(o);
  });

program
  .command('simulate')
  .description('run a scenario on virtual time with each policy and compare')
  .requiredOption('--scenario <file>', 'scenario YAML')
  .option('--policies <list>', "comma-separated policy names (default: the scenario's)")
  .option('--seed <n>', "seed (default: the scenario's)", int('--seed'))
  .option('--out <dir>', 'where results.json and charts go', 'out/simulate')
  .action(async (o: { scenario: string; policies?: string; seed?: number; out: string }) => {
    const { runSimulateCommand } = await import('./sim/command.js');
    await runSimulateCommand({
      scenarioPath: o.scenario,
      policies: list(o.policies),
      seed: o.seed,
      outDir: o.out,
    });
  });

program
  .command('bench')
  .description('run a scenario live: emulated engines (time-scaled) behind a fresh router per policy')
  .requiredOption('--scenario <file>', 'scenario YAML')
  .option('--policies <list>', "comma-separated policy names (default: the scenario's)")
  .option('--seed <n>', "seed (default: the scenario's)", int('--seed'))
  .option(
    '--time-scale <k>',
    "model seconds per real second (default: the scenario's timeScale)",
    positive('--time-scale'),
  )
  .option('--out <dir>', 'where results.json and charts go', 'out/bench')
  .action(
    async (o: { scenario: string; policies?: string; seed?: number; timeScale?: number; out: string }) => {
      const { runBenchCommand } = await import('./bench/command.js');
      await runBenchCommand({
        scenarioPath: o.scenario,
        policies: list(o.policies),
        seed: o.seed,
        timeScale: o.timeScale,
        outDir: o.out,
      });
    },
  );

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
  process.stderr.write(`llmlb: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
}

function isUsage(err: unknown): boolean {
  return err instanceof Error && (err.name === 'UsageError' || err.name === 'ScenarioError');
}
