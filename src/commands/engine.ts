import { defaultProfile, startEngine } from '../engine/server.js';
import { portError } from './port-error.js';

export interface EngineCommandOptions {
  port: number;
  host: string;
  api: string;
  model?: string[];
  slots?: number;
  kv?: number;
  speed?: number;
  timeScale?: number;
  seed?: number;
  failRate?: number;
  /** LoRA adapters served on the first model (each also a model name clients may ask for). */
  lora?: string[];
  maxLora?: number;
  loraSwap?: number;
}

export async function startEngineCommand(o: EngineCommandOptions): Promise<void> {
  if (o.api !== 'ollama' && o.api !== 'openai' && o.api !== 'both') {
    throw Object.assign(new Error(`--api must be ollama, openai or both (got '${o.api}')`), {
      name: 'UsageError',
    });
  }
  const profile = defaultProfile({
    ...(o.slots !== undefined ? { slots: o.slots } : {}),
    ...(o.kv !== undefined ? { kvCapacityTokens: o.kv } : {}),
    ...(o.speed !== undefined ? { speed: o.speed } : {}),
    ...(o.lora !== undefined && o.lora.length > 0
      ? { lora: { maxLora: o.maxLora ?? 4, swapS: o.loraSwap ?? 0.5, adapters: o.lora } }
      : {}),
  });
  const engine = await startEngine({
    host: o.host,
    port: o.port,
    api: o.api,
    models: o.model ?? ['llama3'],
    profile,
    timeScale: o.timeScale ?? 1,
    seed: o.seed ?? 1,
    ...(o.failRate !== undefined ? { faults: { failRate: o.failRate } } : {}),
  }).catch((err: unknown) => {
    throw portError(err, () => 'choose another with --port');
  });
  process.stdout.write(`llmlb engine listening on ${engine.url}\n`);
  const stop = (): void => {
    engine.close().then(
      () => process.exit(0),
      (err: unknown) => {
        process.stderr.write(`llmlb engine: ${String(err)}\n`);
        process.exit(1);
      },
    );
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}
