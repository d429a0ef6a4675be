import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { loadScenario } from '../scenario/load.js';
import { runCell, shortened } from './matrix.js';

const scenarios = join(import.meta.dirname, '..', '..', 'scenarios');
const scenario = (file: string, durationS: number) =>
  shortened(loadScenario(join(scenarios, file)), durationS);

/**
 * Issue #20's unequal-fleet goal, on the simulator: estimated-wait prices a pick at its marginal
 * cost to the fleet (its own finish plus the delay it adds to the batch it joins). Priced at its
 * own finish only (othersWeight 0) it was 13 % better than least-connections; the goal is 15 %.
 */
describe('estimated-wait on batching fleets', () => {
  it('beats least-connections by ≥ 15 % on the unequal fleet, and the selfish pick by ≥ 1.5 %', () => {
    const s = scenario('trace-conversation-unequal.yaml', 300);
    const lc = runCell(s, 'least-connections');
    const ew = runCell(s, 'estimated-wait');
    const selfish = runCell(s, { name: 'estimated-wait', params: { othersWeight: 0 } });
    const msg = `lc ${lc.meanE2eS} ew ${ew.meanE2eS} selfish ${selfish.meanE2eS}`;
    assert.equal(ew.completed, ew.sent, msg);
    assert.ok(ew.meanE2eS <= 0.85 * lc.meanE2eS, msg);
    // ≥ 4 % before ttftWeight (issue #30): pricing the first token also keeps the selfish pick off
    // the fast replicas’ full batches in part (300 s, ttftWeight 6: 9.27 vs 9.44 s).
    assert.ok(ew.meanE2eS <= 0.985 * selfish.meanE2eS, msg);
  });

  it('on identical replicas it keeps the best baseline’s mean and TTFT p90 (a full engine is not free)', () => {
    const s = scenario('trace-conversation-4x.yaml', 300);
    const rr = runCell(s, 'round-robin');
    const lc = runCell(s, 'least-connections');
    const ew = runCell(s, 'estimated-wait');
    const msg = `rr ${rr.meanE2eS}/${rr.ttftP90S} lc ${lc.meanE2eS}/${lc.ttftP90S} ew ${ew.meanE2eS}/${ew.ttftP90S}`;
    assert.ok(ew.meanE2eS <= 1.02 * Math.min(rr.meanE2eS, lc.meanE2eS), msg);
    // Before the queued case was priced, a full replica drew the work: TTFT p90 +81 %; before late
    // binding, +12 % (a request committed to one engine's queue while another's drained first).
    assert.ok(ew.ttftP90S <= 1.1 * Math.min(rr.ttftP90S, lc.ttftP90S), msg);
  });

  it('heimdall-burst: short requests are not stuck behind long ones queued in every engine', () => {
    // 400 long requests at t = 0, then a burst of short ones. Committed to the engines' FIFO queues
    // at once, every short one waited behind ~77 long ones wherever it went (+34 % vs
    // least-connections); held in the router (late binding) and taken in response-ratio order, it
    // goes at the next room. Arrival order among the held ones gives the room to the long ones.
    const s = scenario('heimdall-burst.yaml', 120);
    const lc = runCell(s, 'least-connections');
    const ew = runCell(s, 'estimated-wait');
    const fifo = runCell(s, { name: 'estimated-wait', params: { heldOrder: 'fifo' } });
    const msg = `lc ${lc.meanE2eS} ew ${ew.meanE2eS} fifo ${fifo.meanE2eS}`;
    assert.equal(ew.completed, ew.sent, msg);
    assert.ok(ew.meanE2eS <= 0.8 * lc.meanE2eS, msg);
    assert.ok(fifo.meanE2eS > 0.95 * lc.meanE2eS, msg);
  });
});
