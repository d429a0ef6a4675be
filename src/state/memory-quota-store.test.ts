import { MemoryQuotaStore } from './memory-quota-store.js';
import { quotaStoreSuite } from './quota-store.testing.js';

quotaStoreSuite('memory', async (limits, options, env) => new MemoryQuotaStore(limits, options, env));
