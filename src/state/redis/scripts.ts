import { readFileSync } from 'node:fs';
import type { Redis } from 'ioredis';

/** The Lua scripts beside this file (copied into dist/ and the bench build as assets). */
function lua(name: string): string {
  return readFileSync(new URL(`./${name}.lua`, import.meta.url), 'utf8');
}

/** heartbeat.lua's answer when the caller's epoch is not the state's. */
export const STALE_EPOCH = -1;

export interface QuotaScripts {
  commit(keys: [string, string, string], args: (string | number)[]): Promise<number>;
  heartbeat(
    keys: [string, string, string],
    id: string,
    expiresAt: number,
    epoch: string,
  ): Promise<[string, string] | null | typeof STALE_EPOCH>;
}

/** Register the scripts on a connection (EVALSHA, with EVAL fallback when the script cache is cold). */
export function loadScripts(redis: Redis): QuotaScripts {
  redis.defineCommand('llmlbQuotaCommit', { numberOfKeys: 3, lua: lua('commit') });
  redis.defineCommand('llmlbQuotaHeartbeat', { numberOfKeys: 3, lua: lua('heartbeat') });
  // defineCommand adds methods ioredis' types can't know about.
  const r = redis as unknown as {
    llmlbQuotaCommit(...a: (string | number)[]): Promise<number>;
    llmlbQuotaHeartbeat(...a: (string | number)[]): Promise<[string, string] | null | typeof STALE_EPOCH>;
  };
  return {
    commit: (keys, args) => r.llmlbQuotaCommit(...keys, ...args),
    heartbeat: (keys, id, expiresAt, epoch) => r.llmlbQuotaHeartbeat(...keys, id, expiresAt, epoch),
  };
}
