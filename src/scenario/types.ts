import type { EndpointPickerConfig, PolicySpec } from '../core/policies/index.js';
import type { EngineProfile } from '../engine/types.js';
import type { ClientDriver } from '../workloads/types.js';
import type { ScenarioRegions, ScenarioRouters } from './federation.js';

/** One backend (engine instance) of a scenario's fleet. */
export interface ScenarioBackend {
  readonly name: string;
  readonly profile: EngineProfile;
  /** Models it serves: its base models, then its LoRA adapters (`profile.lora.adapters`). */
  readonly models: readonly string[];
  /** Its LoRA adapters (also in `models`); absent without LoRA. */
  readonly adapters?: readonly string[] | undefined;
  readonly region?: string | undefined;
  /** Router-side cap on requests pushed at once (Infinity = none). */
  readonly maxConcurrency: number;
  readonly weight: number;
}

/** A validated scenario: what `llmlb simulate` and `llmlb bench` both run. */
export interface Scenario {
  readonly name: string;
  readonly description?: string | undefined;
  readonly seed: number;
  /** Expanded fleet (a `count: 4` entry becomes four named backends). */
  readonly fleet: readonly ScenarioBackend[];
  /** Requests are sent during [0, durationS); the run then waits up to graceS for them to finish. */
  readonly durationS: number;
  readonly graceS: number;
  /** Policies to compare, in order. */
  readonly policies: readonly PolicySpec[];
  /** Scheduling profiles the policies may name. */
  readonly scheduling?: EndpointPickerConfig | undefined;
  /** Suggested live time scale for `llmlb bench` (model seconds per real second). */
  readonly timeScale: number;
  /** A fresh client program for one run (each policy gets its own, same seed → same requests). */
  createDriver(seed: number): ClientDriver;
  /** A router per region with its own clients (issue #19); the federation simulator runs it. */
  readonly regions?: ScenarioRegions | undefined;
  /** Several routers in front of this fleet (issue #19). */
  readonly routers?: ScenarioRouters | undefined;
  /** The file's `rateScales`: the load multiples `simulate` sweeps when no --rate-scale is given. */
  readonly rateScales?: readonly number[] | undefined;
  /** The multiple of the file's load this scenario was read at (absent: ×1, as written). */
  readonly rateScale?: number | undefined;
}
