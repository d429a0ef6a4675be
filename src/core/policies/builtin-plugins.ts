import { registerPlugin } from './plugins.js';
import { maxScorePicker } from './pickers/max-score-picker.js';
import { randomPicker } from './pickers/random-picker.js';
import { roundRobinPicker } from './pickers/round-robin-picker.js';
import { weightedRandomPicker } from './pickers/weighted-random-picker.js';
import { weightedRoundRobinPicker } from './pickers/weighted-round-robin-picker.js';
import { activeRequestScorer } from './scorers/active-request-scorer.js';
import { estimatedWaitScorer } from './scorers/estimated-wait-scorer.js';
import { kvCacheUtilizationScorer } from './scorers/kv-cache-utilization-scorer.js';
import { loadAwareScorer } from './scorers/load-aware-scorer.js';
import { noHitLruScorer } from './scorers/no-hit-lru-scorer.js';
import { prefixCacheScorer } from './scorers/prefix-cache-scorer.js';
import { queueScorer } from './scorers/queue-scorer.js';
import { sessionAffinityScorer } from './scorers/session-affinity-scorer.js';

/** The plugin types a config can name, registered once on import. */
registerPlugin('queue-scorer', queueScorer);
registerPlugin('load-aware-scorer', loadAwareScorer);
registerPlugin('active-request-scorer', activeRequestScorer);
registerPlugin('session-affinity-scorer', sessionAffinityScorer);
registerPlugin('prefix-cache-scorer', prefixCacheScorer);
registerPlugin('no-hit-lru-scorer', noHitLruScorer);
registerPlugin('kv-cache-utilization-scorer', kvCacheUtilizationScorer);
registerPlugin('estimated-wait-scorer', estimatedWaitScorer);
registerPlugin('max-score-picker', maxScorePicker);
registerPlugin('random-picker', randomPicker);
registerPlugin('weighted-random-picker', weightedRandomPicker);
registerPlugin('round-robin-picker', roundRobinPicker);
registerPlugin('weighted-round-robin-picker', weightedRoundRobinPicker);
