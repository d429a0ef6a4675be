import type { Policy, PolicyFactory, PolicyParams } from '../types.js';
import { estimatedWait } from './estimated-wait.js';
import { leastConnections } from './least-connections.js';
import { ollamaRouter } from './ollama-router.js';
import { pinned } from './pinned.js';
import { random } from './random.js';
import { roundRobin } from './round-robin.js';
import { weightedRoundRobin } from './weighted-round-robin.js';

/** Every built-in policy by its config name. */
const registry = new Map<string, PolicyFactory>([
  ['round-robin', roundRobin],
  ['least-connections', leastConnections],
  ['random', random],
  ['weighted-round-robin', weightedRoundRobin],
  ['ollama-router', ollamaRouter],
  ['estimated-wait', estimatedWait],
  ['pinned', pinned],
]);

export function policyNames(): string[] {
  return [...registry.keys()];
}

export function registerPolicy(name: string, factory: PolicyFactory): void {
  registry.set(name, factory);
}

/** A policy as written in config: a bare name, or a name with its parameters. */
export interface PolicySpec {
  readonly name: string;
  readonly params?: PolicyParams;
}

/**
 * Build a policy. Throws an Error naming the problem for an unknown name or bad parameters,
 * so the config loader can call it once at load and report the field.
 */
export function createPolicy(spec: PolicySpec | string, random: () => number): Policy {
  const s: PolicySpec = typeof spec === 'string' ? { name: spec } : spec;
  const factory = registry.get(s.name);
  if (!factory) throw new Error(`unknown policy '${s.name}' (known: ${policyNames().join(', ')})`);
  return factory({ random, params: s.params ?? {} });
}
