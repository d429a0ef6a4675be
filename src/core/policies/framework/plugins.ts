import type { PluginFactory } from './plugin.js';

/**
 * Every plugin type by its YAML name (llm-d's names where llm-d has the plugin). Plugin files
 * register themselves through `builtin-plugins.ts`; embedders may add their own.
 */
const registry = new Map<string, PluginFactory>();

export function registerPlugin(type: string, factory: PluginFactory): void {
  registry.set(type, factory);
}

export function pluginTypes(): string[] {
  return [...registry.keys()].sort();
}

export function pluginFactory(type: string): PluginFactory | undefined {
  return registry.get(type);
}
