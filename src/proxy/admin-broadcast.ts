/**
 * `serve --workers N`: an admin change reaches one worker (the one the connection landed on).
 * This wrapper applies it there first — validation included, so a refused change answers 4xx and
 * goes nowhere — then hands it to `broadcast`, and the primary replays it on every other worker
 * (and on workers started later) through `applyAdminChange`.
 */
import type { AdminTarget } from './admin.js';

export type AdminChange =
  | { readonly op: 'addBackend'; readonly body: unknown }
  | { readonly op: 'updateBackend'; readonly name: string; readonly body: unknown }
  | { readonly op: 'drainBackend'; readonly name: string; readonly draining: boolean }
  | { readonly op: 'removeBackend'; readonly name: string }
  | { readonly op: 'setPolicy'; readonly body: unknown };

export function broadcastingAdmin(inner: AdminTarget, broadcast: (c: AdminChange) => void): AdminTarget {
  return {
    backendsState: () => inner.backendsState(),
    decisions: (limit) => inner.decisions(limit),
    addBackend: async (body) => {
      await inner.addBackend(body);
      broadcast({ op: 'addBackend', body });
    },
    updateBackend: (name, body) => {
      inner.updateBackend(name, body);
      broadcast({ op: 'updateBackend', name, body });
    },
    drainBackend: (name, draining) => {
      inner.drainBackend(name, draining);
      broadcast({ op: 'drainBackend', name, draining });
    },
    removeBackend: (name) => {
      inner.removeBackend(name);
      broadcast({ op: 'removeBackend', name });
    },
    setPolicy: (body) => {
      inner.setPolicy(body);
      broadcast({ op: 'setPolicy', body });
    },
  };
}

export function isAdminChange(v: unknown): v is AdminChange {
  if (typeof v !== 'object' || v === null) return false;
  const c = v as { op?: unknown; name?: unknown; draining?: unknown };
  switch (c.op) {
    case 'addBackend':
    case 'setPolicy':
      return true;
    case 'updateBackend':
    case 'removeBackend':
      return typeof c.name === 'string';
    case 'drainBackend':
      return typeof c.name === 'string' && typeof c.draining === 'boolean';
    default:
      return false;
  }
}

/** Apply a change another worker made (already validated there; a refusal here is logged by the caller). */
export async function applyAdminChange(target: AdminTarget, c: AdminChange): Promise<void> {
  switch (c.op) {
    case 'addBackend':
      return target.addBackend(c.body);
    case 'updateBackend':
      return target.updateBackend(c.name, c.body);
    case 'drainBackend':
      return target.drainBackend(c.name, c.draining);
    case 'removeBackend':
      return target.removeBackend(c.name);
    case 'setPolicy':
      return target.setPolicy(c.body);
  }
}
