import { createPolicy, policyNames, type EndpointPickerConfig } from '../core/policies/index.js';
import { readRlWeights } from '../rl/weights-file.js';

/**
 * How commands check a config's policy when they load it (known names, parameters that build):
 * in a module of its own so `whatif` checks as `serve` does without importing serve.ts, which
 * pulls in the proxy (undici, ioredis, OpenTelemetry, prom-client, pino): ~0.7 s of CPU at start.
 */
export const policyCheck = {
  knownPolicies: policyNames(),
  validatePolicy: (
    spec: { name: string; params: Record<string, unknown> },
    scheduling: EndpointPickerConfig | undefined,
  ): void => void createPolicy(spec, Math.random, scheduling, { rlWeights: readRlWeights }),
};
