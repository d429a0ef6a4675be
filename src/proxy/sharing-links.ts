import { hostname } from 'node:os';
import { Redis } from 'ioredis';
import { redisStateTransport, type StateTransport } from '../state/shared-state.js';
import { redisViewTransport, type SharedViewTransport } from '../state/shared-view.js';
import type { RouterHostOptions, RouterSettings } from './router.js';

/**
 * How this router reaches the others: the shared view's transport (Redis, or the primary's under
 * serve --workers N), the shared state's, and its one id in both (a hand-over names it), drawn
 * only when asked for (the router's random stream is the policy's too).
 */
export function sharingLinks(
  settings: RouterSettings,
  hostOpts: RouterHostOptions,
  random: () => number,
): {
  redis: Redis | undefined;
  transport: SharedViewTransport | Redis | undefined;
  stateTransport: StateTransport | undefined;
  routerIdOf: () => string;
} {
  const sv = settings.sharedView;
  const sharedUrl = sv?.redis ?? settings.state?.redis;
  let redis: Redis | undefined;
  let transport: SharedViewTransport | Redis | undefined = hostOpts.viewTransport;
  let stateTransport: StateTransport | undefined = hostOpts.stateTransport;
  let stateId = hostOpts.stateRouterId;
  if (sv && sharedUrl) {
    // Its own connection: a round must not queue behind quota traffic, and losing it only
    // switches this router to its own view.
    redis = new Redis(sharedUrl, {
      maxRetriesPerRequest: 0,
      enableOfflineQueue: false,
      commandTimeout: 1000,
    });
    redis.on('error', () => {}); // counted as failed rounds
    transport = redis;
    if (settings.sharedState) {
      // A subscribed connection runs nothing else: its own. It hears the others' batches and
      // the shared view's hand-overs.
      const sub = new Redis(sharedUrl, { maxRetriesPerRequest: 0, enableOfflineQueue: false });
      sub.on('error', () => {}); // counted as failed publishes; ioredis reconnects
      stateTransport = redisStateTransport(redis, sub, sv.prefix);
      transport = redisViewTransport(redis, sv.prefix, sub);
    }
    stateId = undefined; // one id among every host's routers
  }
  // Under serve --workers N without Redis, the primary's name for this worker.
  let drawn: string | undefined;
  const routerIdOf = (): string =>
    (drawn ??= stateId ?? `${hostname()}-${process.pid}-${Math.floor(random() * 1e9)}`);
  return { redis, transport, stateTransport, routerIdOf };
}
