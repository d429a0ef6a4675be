import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { flattenMessages } from '../core/prompt.js';
import { multiTurnWorkload } from './multi-turn.js';
import { treeOfThoughtWorkload, treeSize } from './tree-of-thought.js';
import type { ClientDriver, ScheduledRequest, WorkloadRequest } from './types.js';

const textOf = (r: WorkloadRequest): string => r.prompt ?? flattenMessages(r.messages ?? []);

/**
 * A toy server: every request takes `serviceS` and answers `answer(id)`. Returns every request sent,
 * with its send time, in send order.
 */
function drive(
  driver: ClientDriver,
  serviceS = 1,
  answer = (id: string) => `answer of ${id}. `,
  ok = (_id: string) => true,
): ScheduledRequest[] {
  const sent: ScheduledRequest[] = [];
  let queue = driver.start().slice();
  while (queue.length > 0) {
    queue.sort((a, b) => a.at - b.at || a.request.id.localeCompare(b.request.id));
    const next = queue.shift()!;
    sent.push(next);
    const id = next.request.id;
    const done = next.at + serviceS;
    // Service time is constant, so finishes come in send order: handling each at its send is in time order.
    const follow = driver.onFinish(id, done, ok(id), ok(id) ? answer(id) : '');
    for (const f of follow) assert.ok(f.at >= done, 'follow-ups are never in the past');
    queue = queue.concat(follow);
  }
  return sent;
}

describe('multi-turn', () => {
  const params = {
    clients: 3,
    conversations: 2,
    turns: 4,
    thinkTimeS: 2,
    durationS: 10000,
    systemPrompt: { tokens: 100 },
  };

  it('start sends one request per client; nothing more until a request finishes', () => {
    const d = multiTurnWorkload(params, 1);
    const first = d.start();
    assert.equal(first.length, 3);
    assert.ok(first.every((s) => s.at < 10));
    assert.deepEqual(d.onFinish('unknown', 5, true, 'x'), []);
    const follow = d.onFinish(first[0]!.request.id, 50, true, 'the answer');
    assert.equal(follow.length, 1);
    assert.equal(follow[0]!.at, 52); // 2 s of think time after the answer
  });

  it('each turn resends the full history including the previous answers', () => {
    const sent = drive(multiTurnWorkload(params, 1));
    assert.equal(sent.length, 3 * 2 * 4);
    const conv = sent.filter((s) => s.request.sessionKey === 'c1-2').map((s) => s.request);
    assert.deepEqual(
      conv.map((r) => r.id),
      ['c1-2-1', 'c1-2-2', 'c1-2-3', 'c1-2-4'],
    );
    for (let t = 1; t < conv.length; t++) {
      const prev = conv[t - 1]!;
      const cur = conv[t]!;
      assert.equal(cur.api, 'openai-chat');
      // Previous turn's messages are a prefix; then the assistant's answer, then a new user turn.
      assert.deepEqual(cur.messages!.slice(0, prev.messages!.length), prev.messages);
      assert.deepEqual(cur.messages![prev.messages!.length], {
        role: 'assistant',
        content: `answer of ${prev.id}. `,
      });
      assert.equal(cur.messages!.at(-1)!.role, 'user');
      assert.ok(textOf(cur).startsWith(textOf(prev)));
    }
    // Every conversation of every client opens with the same system prompt.
    const sys = sent[0]!.request.messages![0]!;
    assert.equal(sys.role, 'system');
    assert.ok(sent.every((s) => s.request.messages![0]!.content === sys.content));
  });

  it('synthesizes an answer of the hinted length when the host passes no text', () => {
    const d = multiTurnWorkload({ ...params, clients: 1, outputTokens: 30 }, 1);
    const [first] = d.start();
    const [second] = d.onFinish(first!.request.id, 1, true, '');
    assert.equal(second!.request.messages!.at(-2)!.content.length, 30 * 4);
  });

  it('a failed turn ends the conversation; durationS stops new requests', () => {
    const sent = drive(
      multiTurnWorkload({ ...params, clients: 1 }, 1),
      1,
      undefined,
      (id) => !id.endsWith('-1-2'),
    );
    assert.deepEqual(
      sent.map((s) => s.request.id),
      ['c0-1-1', 'c0-1-2', 'c0-2-1', 'c0-2-2', 'c0-2-3', 'c0-2-4'],
    );
    const capped = drive(multiTurnWorkload({ ...params, conversations: undefined, durationS: 30 }, 1), 5);
    assert.ok(capped.every((s) => s.at < 30));
    assert.ok(capped.length > 6);
  });

  it('turn counts and lengths follow their distributions', () => {
    const sent = drive(
      multiTurnWorkload(
        {
          clients: 20,
          conversations: 10,
          turns: { dist: 'uniform', min: 2, max: 6 },
          outputTokens: 100,
          durationS: 1e9,
        },
        3,
      ),
    );
    const perConv = new Map<string, number>();
    for (const s of sent) perConv.set(s.request.sessionKey!, (perConv.get(s.request.sessionKey!) ?? 0) + 1);
    assert.equal(perConv.size, 200);
    const m = [...perConv.values()].reduce((a, b) => a + b, 0) / perConv.size;
    assert.ok(Math.abs(m - 4) < 0.25, `mean turns ${m}`);
    assert.ok(sent.every((s) => s.request.outputTokens === 100));
  });

  it('sessionKeyBy client: one key per user; a per-user preamble opens all of their conversations', () => {
    const byUser = { ...params, sessionKeyBy: 'client' as const, userPrefixTokens: 50 };
    const sent = drive(multiTurnWorkload(byUser, 1));
    assert.equal(sent.length, 3 * 2 * 4);
    assert.deepEqual([...new Set(sent.map((s) => s.request.sessionKey))].sort(), ['c0', 'c1', 'c2']);
    for (const user of ['c0', 'c1', 'c2']) {
      const mine = sent.filter((s) => s.request.sessionKey === user).map((s) => s.request);
      assert.equal(mine.length, 8);
      // Ids still name the conversation and turn, in turn order within each conversation.
      assert.deepEqual(
        mine.filter((r) => r.id.startsWith(`${user}-2-`)).map((r) => r.id),
        [`${user}-2-1`, `${user}-2-2`, `${user}-2-3`, `${user}-2-4`],
      );
      const pre = mine[0]!.messages![1]!;
      assert.equal(pre.role, 'system');
      assert.ok(pre.content.startsWith(`[user ${user}] `));
      assert.equal(pre.content.length, 50 * 4);
      assert.ok(mine.every((r) => r.messages![1]!.content === pre.content));
    }
    // Users' preambles differ (so they share only the common system prompt).
    const pres = new Set(sent.map((s) => s.request.messages![1]!.content));
    assert.equal(pres.size, 3);
    // Without a preamble the conversations are exactly what they were (its draws are a separate stream).
    const plain = drive(multiTurnWorkload(params, 1));
    const noPre = drive(multiTurnWorkload({ ...params, sessionKeyBy: 'client' }, 1));
    assert.deepEqual(
      noPre.map((s) => [s.at, s.request.id, s.request.messages]),
      plain.map((s) => [s.at, s.request.id, s.request.messages]),
    );
  });

  it('same seed → identical output; different seed → different', () => {
    assert.deepEqual(drive(multiTurnWorkload(params, 7)), drive(multiTurnWorkload(params, 7)));
    assert.notDeepEqual(drive(multiTurnWorkload(params, 7)), drive(multiTurnWorkload(params, 8)));
  });
});

describe('tree-of-thought', () => {
  const params = { clients: 2, branching: 2, depth: 4, trees: 3, durationS: 1e6 };

  it('branching 2, depth 4 → 15 requests per tree', () => {
    assert.equal(treeSize(2, 4), 15);
    assert.equal(treeSize(4, 4), 85); // SkyLB's 4-branch trees
    const sent = drive(treeOfThoughtWorkload(params, 1));
    assert.equal(sent.length, 2 * 3 * 15);
    const perTree = new Map<string, number>();
    for (const s of sent) perTree.set(s.request.sessionKey!, (perTree.get(s.request.sessionKey!) ?? 0) + 1);
    assert.deepEqual([...perTree.values()], Array(6).fill(15));
  });

  it('children are sent only when their parent finishes, and share its prompt + answer', () => {
    const d = treeOfThoughtWorkload({ ...params, clients: 1 }, 1);
    const [root] = d.start();
    assert.equal(root!.request.id, 't0-1-n0');
    const kids = d.onFinish('t0-1-n0', 3, true, 'first thought. ');
    assert.deepEqual(
      kids.map((k) => [k.request.id, k.at]),
      [
        ['t0-1-n1', 3],
        ['t0-1-n2', 3],
      ],
    );
    const rootText = textOf(root!.request);
    for (const k of kids) {
      assert.ok(textOf(k.request).startsWith(`${rootText}\nfirst thought. \n`));
      assert.equal(k.request.sessionKey, 't0-1');
    }
    assert.notEqual(textOf(kids[0]!.request), textOf(kids[1]!.request));
    // Grandchildren extend their own parent, not the sibling.
    const gk = d.onFinish('t0-1-n2', 4, true, 'second. ');
    assert.deepEqual(
      gk.map((k) => k.request.id),
      ['t0-1-n5', 't0-1-n6'],
    );
    assert.ok(gk.every((k) => textOf(k.request).startsWith(textOf(kids[1]!.request) + '\nsecond. ')));
  });

  it('the next tree starts only after the whole tree is done; leaves have no children', () => {
    const sent = drive(treeOfThoughtWorkload({ ...params, clients: 1, trees: 2 }, 1), 1);
    const lastOfFirst = Math.max(...sent.filter((s) => s.request.sessionKey === 't0-1').map((s) => s.at));
    const firstOfSecond = Math.min(...sent.filter((s) => s.request.sessionKey === 't0-2').map((s) => s.at));
    assert.ok(firstOfSecond >= lastOfFirst + 1);
    // Levels: 1 root at t0, 2 at t0+1, 4 at t0+2, 8 at t0+3.
    const t0 = sent[0]!.at;
    const levels = sent.filter((s) => s.request.sessionKey === 't0-1').map((s) => s.at - t0);
    assert.deepEqual(levels, [0, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3]);
  });

  it('a failed node drops its subtree', () => {
    const sent = drive(
      treeOfThoughtWorkload({ ...params, clients: 1, trees: 1 }, 1),
      1,
      undefined,
      (id) => id !== 't0-1-n1',
    );
    assert.equal(sent.length, 15 - 6); // n1's 2 children and 4 grandchildren are never sent
  });

  it('same seed → identical output; different seed → different', () => {
    assert.deepEqual(drive(treeOfThoughtWorkload(params, 3)), drive(treeOfThoughtWorkload(params, 3)));
    assert.notDeepEqual(drive(treeOfThoughtWorkload(params, 3)), drive(treeOfThoughtWorkload(params, 4)));
  });
});
