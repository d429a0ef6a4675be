/**
 * What every part of the emulated engine's server shares (`startEngine` builds it once): the
 * served models and their names, the per-model counters behind /metrics, the request count and the
 * fault settings (both change while it runs), and the model driven in real time.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RealTimeDriver } from './driver.js';
import type { EngineFaults } from './faults.js';
import { HttpError } from './http.js';
import { emptyCounts, type ModelCounts } from './metrics.js';
import type { EngineProfile, EngineStats } from './types.js';
import type { ErrorFormat } from './wire.js';

export interface EngineContext {
  readonly name: string;
  readonly seed: number;
  readonly timeScale: number;
  readonly profile: EngineProfile;
  readonly driver: RealTimeDriver;
  /** Mean of the output length drawn when a request names none. */
  readonly meanOutput: number;
  /** The models as configured, then the LoRA adapters (served as models of their own on the first). */
  readonly baseModels: readonly string[];
  readonly adapters: readonly string[];
  /** baseModels then adapters: every name the engine serves. */
  readonly models: readonly string[];
  /** Whether the Ollama API is served (it serves the OpenAI routes too). */
  readonly ollama: boolean;
  readonly contextLength: number;
  readonly startedAt: string;
  /** Per-model counters for /metrics (running / waiting filled in by `modelCounts`). */
  readonly perModel: Map<string, ModelCounts>;
  /** The counters of each submitted sequence's model, until the sequence ends. */
  readonly seqModel: Map<string, ModelCounts>;
  /** Replaced whole by POST /_emulator/faults or `setFaults`; read per request. */
  faults: EngineFaults;
  /** Generation and embedding requests taken so far. */
  requests: number;
}

export function createContext(
  fields: Omit<EngineContext, 'models' | 'perModel' | 'seqModel' | 'requests'>,
): EngineContext {
  const models = [...fields.baseModels, ...fields.adapters];
  return {
    ...fields,
    models,
    perModel: new Map<string, ModelCounts>(models.map((m) => [m, emptyCounts()])),
    seqModel: new Map<string, ModelCounts>(),
    requests: 0,
  };
}

/** Ollama names 'llama3' and 'llama3:latest' the same model: the name it is served as, if any. */
export const servedAs = (ctx: EngineContext, m: string): string | undefined =>
  ctx.models.includes(m)
    ? m
    : m.endsWith(':latest') && ctx.models.includes(m.slice(0, -7))
      ? m.slice(0, -7)
      : ctx.models.includes(`${m}:latest`)
        ? `${m}:latest`
        : undefined;

/** The API family's 404 for a model the engine does not serve. */
export const modelNotFound = (format: ErrorFormat, m: string): HttpError =>
  format === 'ollama'
    ? new HttpError(404, `model '${m}' not found`, 'model_not_found')
    : new HttpError(404, `The model \`${m}\` does not exist.`, 'model_not_found');

/** A body's model, if it is one the engine serves; else 400 (none) or the family's 404. */
export function modelOr404(ctx: EngineContext, format: ErrorFormat, m: unknown): string {
  if (typeof m !== 'string' || m === '') throw new HttpError(400, 'model is required', 'missing_model');
  if (servedAs(ctx, m) === undefined) throw modelNotFound(format, m);
  return m;
}

/** perModel with running / waiting counted now, each sequence under its own model only. */
export function modelCounts(ctx: EngineContext): ReadonlyMap<string, ModelCounts> {
  for (const c of ctx.perModel.values()) c.running = c.waiting = 0;
  ctx.driver.model.forEachLive((seq, running) => {
    const c = ctx.seqModel.get(seq);
    if (c) {
      if (running) c.running++;
      else c.waiting++;
    }
  });
  return ctx.perModel;
}

export const engineStats = (ctx: EngineContext): EngineStats & { requests: number } => ({
  ...ctx.driver.model.stats(),
  requests: ctx.requests,
});

/** One path the engine serves. */
export interface Route {
  readonly method: 'GET' | 'POST';
  readonly format: ErrorFormat;
  /** A listing route that `failRate` also fails (generation routes apply their own faults). */
  readonly probe?: boolean;
  readonly handle: (req: IncomingMessage, res: ServerResponse) => void | Promise<void>;
}
