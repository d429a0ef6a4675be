import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { RequestInfo } from '../core/types.js';
import { Federation } from './federation.js';

const peers = [
  { name: 'eu', url: 'http://eu:8080', region: 'eu' },
  { name: 'asia', url: 'http://asia:8080', region: 'asia' },
];
const req = (id: string, promptText: string, sessionKey?: string): RequestInfo => ({
  id,
  model: 'm',
  api: 'openai',
  arrivedAt: 0,
  promptText,
  sessionKey,
});
const free = { availableReplicas: 1, queueLength: 0 };

describe('Federation (SkyLB Algorithm 1)', () => {
  it('runs locally while a local replica is available, and never forwards a forwarded request', () => {
    const f = new Federation({ region: 'us', peers, selection: 'trie' });
    f.setStatus('eu', { region: 'eu', ...free }, 0);
    assert.deepEqual(f.route(req('a', 'x'), false, true, 0), { kind: 'local' });
    // Hop marker: even with every local replica full and a peer free, it stays.
    assert.deepEqual(f.route(req('a', 'x'), true, false, 0), { kind: 'local' });
    assert.deepEqual(f.route(req('a', 'x'), false, false, 0), {
      kind: 'peer',
      peer: 'eu',
      url: 'http://eu:8080',
    });
  });

  it('queues locally when no peer is available: none free, queue over τ, stale status, ejected', () => {
    const f = new Federation({
      region: 'us',
      peers,
      selection: 'trie',
      tau: 1,
      statusTtlMs: 1000,
      ejectMs: 500,
    });
    assert.equal(f.route(req('a', 'x'), false, false, 0).kind, 'local'); // never probed
    f.setStatus('eu', { region: 'eu', availableReplicas: 0, queueLength: 0 }, 0);
    f.setStatus('asia', { region: 'asia', availableReplicas: 2, queueLength: 2 }, 0);
    assert.equal(f.route(req('a', 'x'), false, false, 0).kind, 'local');
    f.setStatus('asia', { region: 'asia', availableReplicas: 2, queueLength: 1 }, 0);
    assert.equal(f.route(req('a', 'x'), false, false, 10).kind, 'peer');
    // What we sent since the status counts as queued there: τ = 1 lets one more through, then full.
    f.onForwarded(req('a', 'x'), 'asia');
    assert.equal(f.route(req('b', 'x'), false, false, 10).kind, 'local');
    f.setStatus('asia', { region: 'asia', ...free }, 100);
    assert.equal(f.route(req('b', 'x'), false, false, 1099).kind, 'peer');
    assert.equal(f.route(req('b', 'x'), false, false, 1101).kind, 'local'); // stale
    f.setStatus('asia', { region: 'asia', ...free }, 2000);
    f.onDone('asia', false, 2000); // failed before any byte: ejected
    f.setStatus('asia', { region: 'asia', ...free }, 2100);
    assert.equal(f.route(req('c', 'x'), false, false, 2100).kind, 'local');
    f.setStatus('asia', { region: 'asia', ...free }, 2600);
    assert.equal(f.route(req('c', 'x'), false, false, 2600).kind, 'peer');
    assert.equal(f.describe(2600).find((p) => p.peer === 'asia')!.failures, 1);
  });

  it('skylb: the regional snapshot trie sends a prompt where its prefix went', () => {
    const f = new Federation({ region: 'us', peers, selection: 'trie', chunkChars: 8, tau: 100 });
    f.setStatus('eu', { region: 'eu', ...free }, 0);
    f.setStatus('asia', { region: 'asia', ...free }, 0);
    const long = 'conversation-one: hello there, a long shared history';
    f.onForwarded(req('a', long), 'asia');
    for (let i = 0; i < 5; i++) {
      const d = f.route(req(`f${i}`, `${long} turn ${i}`), false, false, 1);
      assert.deepEqual(d, { kind: 'peer', peer: 'asia', url: 'http://asia:8080' });
    }
    // asia unavailable: the prefix's holder is skipped, the other peer takes it.
    f.setStatus('asia', { region: 'asia', availableReplicas: 0, queueLength: 0 }, 2);
    assert.equal((f.route(req('g', long), false, false, 2) as { peer: string }).peer, 'eu');
  });

  it('skylb-ch: the peer ring keeps a session on one peer and walks on when it is full', () => {
    const f = new Federation({ region: 'us', peers, selection: 'ring', tau: 100 });
    f.setStatus('eu', { region: 'eu', ...free }, 0);
    f.setStatus('asia', { region: 'asia', ...free }, 0);
    const home = (f.route(req('a', 'p', 'user-7'), false, false, 1) as { peer: string }).peer;
    for (let i = 0; i < 10; i++)
      assert.equal(
        (f.route(req(`b${i}`, `q${i}`, 'user-7'), false, false, 1) as { peer: string }).peer,
        home,
      );
    f.setStatus(home, { region: home, availableReplicas: 0, queueLength: 0 }, 2);
    const other = (f.route(req('c', 'p', 'user-7'), false, false, 2) as { peer: string }).peer;
    assert.notEqual(other, home);
  });

  it('the snapshot trie stays within its bound', () => {
    const f = new Federation({ region: 'us', peers, selection: 'trie', chunkChars: 4, maxEntries: 50 });
    for (let i = 0; i < 500; i++)
      f.onForwarded(req(`r${i}`, `prompt number ${i} with some text`), i % 2 ? 'eu' : 'asia');
    assert.ok(f.snapshot.size <= 50, `size ${f.snapshot.size}`);
    f.snapshot.checkInvariants();
  });

  it('rejects a peer listed twice', () => {
    assert.throws(
      () => new Federation({ region: 'us', peers: [peers[0]!, peers[0]!], selection: 'trie' }),
      /twice/,
    );
  });
});
