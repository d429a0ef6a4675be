import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { getWorkloadType } from './index.js';
import { treeSize } from './tree-of-thought.js';
import type { ClientDriver, ScheduledRequest } from './types.js';

/** Every request the driver sends when each one takes `serviceS`, in send order. */
function drive(driver: ClientDriver, serviceS = 1): ScheduledRequest[] {
  const sent: ScheduledRequest[] = [];
  let queue = driver.start().slice();
  while (queue.length > 0) {
    queue.sort((a, b) => a.at - b.at || a.request.id.localeCompare(b.request.id));
    const next = queue.shift()!;
    sent.push(next);
    queue = queue.concat(
      driver.onFinish(next.request.id, next.at + serviceS, true, `answer ${next.request.id}`),
    );
  }
  return sent;
}

const mixedTree = {
  parts: [
    { type: 'tree-of-thought', clients: 2, branching: 4, depth: 4, trees: 1, idPrefix: 'big' },
    { type: 'tree-of-thought', clients: 20, branching: 2, depth: 4, trees: 2, idPrefix: 'small' },
  ],
  durationS: 1e6,
};

function create(params: unknown, seed = 1): ClientDriver {
  const r = getWorkloadType('mix')!.bind(params);
  if (!r.success) throw r.error;
  return r.create(seed);
}

describe('mix workload', () => {
  it("SkyLB's mixed tree: 2 clients of 85-request trees beside 20 clients of 15-request trees", () => {
    const sent = drive(create(mixedTree));
    const big = sent.filter((s) => s.request.id.startsWith('big'));
    const small = sent.filter((s) => s.request.id.startsWith('small'));
    assert.equal(treeSize(4, 4), 85);
    assert.equal(big.length, 2 * 1 * 85);
    assert.equal(small.length, 20 * 2 * 15);
    // Each part's trees keep their own shape: one tree per session key.
    const perTree = new Map<string, number>();
    for (const s of sent) perTree.set(s.request.sessionKey!, (perTree.get(s.request.sessionKey!) ?? 0) + 1);
    for (const [key, n] of perTree) assert.equal(n, key.startsWith('big') ? 85 : 15, key);
    assert.equal(new Set(sent.map((s) => s.request.id)).size, sent.length, 'ids are unique');
  });

  it('start opens every part; a follow-up goes back to the part that sent the request', () => {
    const d = create(mixedTree);
    const first = d.start();
    assert.equal(first.length, 22); // one root per client
    const root = first.find((s) => s.request.id.startsWith('big'))!;
    const children = d.onFinish(root.request.id, 5, true, 'the thought');
    assert.equal(children.length, 4);
    assert.ok(children.every((c) => c.request.sessionKey === root.request.sessionKey && c.at === 5));
    assert.deepEqual(d.onFinish(root.request.id, 6, true, 'again'), [], 'a finish is handled once');
    assert.deepEqual(d.onFinish('nobody', 6, true, ''), []);
  });

  it('same seed → identical requests; parts draw from their own seeds', () => {
    const a = drive(create(mixedTree, 7));
    const b = drive(create(mixedTree, 7));
    assert.deepEqual(a, b);
    const c = drive(create(mixedTree, 8));
    assert.notDeepEqual(
      a.map((s) => s.request.prompt),
      c.map((s) => s.request.prompt),
    );
    // Appending a part leaves what the earlier parts send exactly as it was.
    const more = {
      ...mixedTree,
      parts: [...mixedTree.parts, { type: 'tree-of-thought', clients: 1, trees: 1, idPrefix: 'extra' }],
    };
    const withExtra = drive(create(more, 7)).filter((s) => !s.request.id.startsWith('extra'));
    assert.deepEqual(
      withExtra.map((s) => [s.request.id, s.request.prompt]),
      a.map((s) => [s.request.id, s.request.prompt]),
    );
  });

  it('bad parts are reported with their path; colliding ids are an error, not a misroute', () => {
    const bad = getWorkloadType('mix')!.bind({ parts: [{ type: 'tree-of-thought', branching: 0 }] });
    assert.equal(bad.success, false);
    if (!bad.success) assert.deepEqual(bad.error.issues[0]!.path, ['parts', 0, 'branching']);
    const unknown = getWorkloadType('mix')!.bind({ parts: [{ type: 'nope' }] });
    assert.equal(unknown.success, false);
    if (!unknown.success) assert.match(unknown.error.issues[0]!.message, /unknown workload type 'nope'/);
    const clash = create({
      parts: [
        { type: 'tree-of-thought', clients: 1, trees: 1 },
        { type: 'tree-of-thought', clients: 1, trees: 1 },
      ],
    });
    assert.throws(() => clash.start(), /sent by parts 0 and 1/);
  });
});
