import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { parseConfig } from '../config/load.js';
import { policyNames } from '../core/policies/index.js';
import { traceWorkload } from '../workloads/trace.js';
import { hashKey, TraceCapture, type CaptureEntry } from './capture.js';

const system = 'You are a helpful assistant. '.repeat(40); // ~290 tokens shared by every request

function entry(i: number, over: Partial<CaptureEntry> = {}): CaptureEntry {
  return {
    arrivalMs: 1_000_000 + i * 250,
    model: 'llama3',
    api: 'openai-chat',
    promptText: `${system}\nquestion ${i}: ${'why '.repeat(i * 20)}`,
    promptTokens: 300 + i * 20,
    outputTokens: 10 + i,
    sessionKey: `user-${i % 3}`,
    backend: `b${i % 2}`,
    ttftMs: 40,
    e2eMs: 900,
    status: 200,
    ...over,
  };
}

describe('trace capture', () => {
  it('writes llmlb trace lines (no text) that replay with the same counts and shared prefixes', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'llmlb-cap-')), 'sub', 'trace.jsonl');
    const cap = new TraceCapture({ file, maxBytes: 1e9, keep: 2, originMs: 1_000_000 });
    for (let i = 0; i < 20; i++) cap.record(entry(i));
    cap.record(entry(20, { outputTokens: 0, status: 502, ttftMs: undefined }));
    await cap.close();
    const text = readFileSync(file, 'utf8');
    assert.ok(!text.includes('helpful'), 'no prompt text without prompts: true');
    assert.ok(!text.includes('user-1'), 'session keys are hashed');
    const first = JSON.parse(text.split('\n')[0]!) as Record<string, unknown>;
    assert.equal(first.at, 0);
    assert.equal(first.sessionKey, hashKey('user-0'));
    assert.equal(first.status, 200);
    assert.equal(first.ttftS, 0.04);

    const replay = traceWorkload({ path: file }, 1);
    const rs = replay.start();
    assert.equal(rs.length, 21);
    assert.equal(
      replay.stats.promptTokens,
      Array.from({ length: 21 }, (_, i) => 300 + i * 20).reduce((a, b) => a + b),
    );
    assert.equal(
      replay.stats.outputTokens,
      Array.from({ length: 20 }, (_, i) => 10 + i).reduce((a, b) => a + b) + 1,
    );
    assert.equal(rs[3]!.at, 0.75);
    // The shared system prompt's blocks (4 blocks of 64 tokens) are a shared stand-in prefix.
    const a = rs[1]!.request.messages![0]!.content;
    const b = rs[7]!.request.messages![0]!.content;
    assert.equal(a.slice(0, 32), b.slice(0, 32));
    assert.equal(rs[1]!.request.sessionKey, rs[4]!.request.sessionKey);
  });

  it('rotates by size, keeping `keep` old files', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'llmlb-cap-')), 'trace.jsonl');
    const cap = new TraceCapture({ file, maxBytes: 2000, keep: 2 });
    for (let round = 0; round < 6; round++) {
      for (let i = 0; i < 5; i++) cap.record(entry(i));
      await cap.drain();
    }
    await cap.close();
    assert.ok(existsSync(`${file}.1`) && existsSync(`${file}.2`) && !existsSync(`${file}.3`));
    for (const f of [file, `${file}.1`, `${file}.2`]) {
      const lines = readFileSync(f, 'utf8').trim().split('\n');
      assert.ok(lines.length >= 1);
      for (const l of lines) JSON.parse(l);
    }
    assert.equal(cap.recorded, 30);
  });

  it('with prompts: true the text is kept and replayed as written', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'llmlb-cap-')), 'trace.jsonl');
    const cap = new TraceCapture({ file, maxBytes: 1e9, keep: 0, prompts: true, originMs: 0 });
    cap.record(entry(1));
    await cap.close();
    const [r] = traceWorkload({ path: file }, 1).start();
    assert.equal(r!.request.messages![0]!.content, entry(1).promptText);
  });
});

describe('trace config', () => {
  const base = 'backends: [{ name: a, url: "http://127.0.0.1:1" }]\n';
  const opts = { knownPolicies: policyNames() };
  it('trace: { file, maxBytes, keep } with sizes in units and defaults', () => {
    const c = parseConfig(base + 'trace: { file: traces/llmlb.jsonl, maxBytes: 100MB }', opts);
    assert.deepEqual(c.trace, { file: 'traces/llmlb.jsonl', maxBytes: 100_000_000, keep: 5 });
    assert.equal(
      parseConfig(base + 'trace: { file: t.jsonl, maxBytes: 64KiB, keep: 0 }', opts).trace?.maxBytes,
      65536,
    );
    assert.equal(parseConfig(base, opts).trace, undefined);
  });
  it('bad values name the field', () => {
    assert.throws(
      () => parseConfig(base + 'trace: { file: t.jsonl, maxBytes: lots }', opts),
      /trace\.maxBytes/,
    );
    assert.throws(() => parseConfig(base + 'trace: { maxBytes: 10 }', opts), /trace\.file/);
    assert.throws(() => parseConfig(base + 'trace: { file: t.jsonl, rotate: 1 }', opts), /rotate/);
  });
});
