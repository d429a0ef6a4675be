import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { parseConfig } from '../config/load.js';
import { policyNames } from '../core/policies/index.js';
import { blockHashHex, promptBlockHashes } from '../engine/tokens.js';
import { traceWorkload } from '../workloads/trace.js';
import {
  BATCH_BYTES,
  BATCH_ENTRIES,
  blockHex,
  CAPTURE_BLOCK_TOKENS,
  captureLine,
  hashKey,
  jsonSeconds3,
  TraceCapture,
  type CaptureEntry,
} from './capture.js';

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

  it('drain() while a batch is being written writes the rest without waiting on the flush timer', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'llmlb-cap-')), 'trace.jsonl');
    const cap = new TraceCapture({ file, maxBytes: 1e9, keep: 0, originMs: 1_000_000 });
    // A serialization pass of BATCH_ENTRIES lines fills a batch and starts a write; the lines
    // after it wait behind that write, with the (unref'd) flush timer armed. Nothing else keeps
    // the event loop alive: a drain that waited for that timer would never settle and the test
    // would end unfinished.
    const first = Array.from({ length: BATCH_ENTRIES }, (_, i) =>
      captureLine(entry(i % 20), 1_000_000, false),
    );
    assert.ok(first.join('\n').length >= BATCH_BYTES, 'the first pass fills a batch');
    const n = BATCH_ENTRIES + 3;
    for (let i = 0; i < n; i++) cap.record(entry(i % 20));
    await cap.close();
    assert.equal(readFileSync(file, 'utf8').trim().split('\n').length, n);
  });

  it('writes every line whole and in order: long non-ASCII lines, lines over a write buffer', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'llmlb-cap-')), 'trace.jsonl');
    const cap = new TraceCapture({ file, maxBytes: 1e9, keep: 0, prompts: true, originMs: 1_000_000 });
    const want: string[] = [];
    for (let i = 0; i < 300; i++) {
      // Mostly short lines; every 37th a prompt of 3-byte characters larger than BATCH_BYTES.
      const promptText =
        i % 37 === 5 ? `${'漢字テキスト'.repeat(6000 + i)} ${i}` : `q${i} ü ${'x'.repeat(i * 7)}`;
      const e = entry(i, { promptText, model: `m-"${i}"\\é` });
      cap.record(e);
      want.push(captureLine(e, 1_000_000, true));
      if (i % 50 === 0) await cap.drain();
    }
    await cap.close();
    assert.equal(readFileSync(file, 'utf8'), want.map((l) => `${l}\n`).join(''));
    assert.equal(cap.recorded, 300);
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

describe('trace capture on a failing disk', () => {
  it('counts the lines of a failed write as dropped and never throws (ENOSPC: /dev/full)', async () => {
    const cap = new TraceCapture({ file: '/dev/full', maxBytes: 1e12, keep: 0, originMs: 1_000_000 });
    const n = BATCH_ENTRIES * 2 + 7;
    for (let i = 0; i < n; i++) cap.record(entry(i % 40));
    await cap.drain(); // every write failed: drain still settles
    for (let i = 0; i < 5; i++) cap.record(entry(i));
    await cap.close();
    assert.equal(cap.recorded, n + 5);
    assert.equal(cap.written, 0);
    assert.equal(cap.dropped, n + 5, 'every line lost is counted');
    assert.ok(cap.failures >= 2, 'the failed writes are counted');
    assert.equal(cap.lastError, 'ENOSPC');
  });

  it('survives a rotation that cannot rename (directory gone): recreates the file and writes on', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmlb-cap-'));
    const file = join(dir, 'logs', 'trace.jsonl');
    const cap = new TraceCapture({ file, maxBytes: 3000, keep: 2, originMs: 1_000_000 });
    for (let i = 0; i < 5; i++) cap.record(entry(i));
    await cap.drain();
    assert.equal(cap.written, 5);
    // The operator (or a log cleaner) removes the whole directory under the running router.
    rmSync(join(dir, 'logs'), { recursive: true, force: true });
    for (let i = 0; i < 5; i++) cap.record(entry(i));
    await cap.drain();
    for (let i = 0; i < 5; i++) cap.record(entry(i));
    await cap.close();
    assert.ok(cap.failures >= 1, 'the failed rename is counted');
    assert.equal(cap.lastError, 'ENOENT');
    assert.equal(cap.recorded, 15);
    assert.equal(cap.written + cap.dropped, 15, 'every line is written or counted as dropped');
    // The file was recreated and holds whole, replayable lines.
    const lines = readFileSync(file, 'utf8').trim().split('\n');
    assert.ok(lines.length >= 5);
    for (const l of lines) assert.equal((JSON.parse(l) as { model: string }).model, 'llama3');
  });
});

/** The line as record() wrote it before it was built by hand: an object and JSON.stringify. */
function referenceLine(e: CaptureEntry, originMs: number, prompts: boolean): string {
  const r3 = (x: number): number => Math.round(x * 1000) / 1000;
  const text = e.promptText;
  return JSON.stringify({
    at: Math.max(0, r3((e.arrivalMs - originMs) / 1000)),
    model: e.model,
    api: e.api,
    ...(prompts ? { prompt: text } : {}),
    promptTokens: e.promptTokens ?? Math.ceil(text.length / 4),
    outputTokens: Math.max(1, e.outputTokens ?? 1),
    ...(e.maxTokens !== undefined ? { maxTokens: e.maxTokens } : {}),
    ...(e.sessionKey !== undefined && e.sessionKey !== '' ? { sessionKey: hashKey(e.sessionKey) } : {}),
    blockTokens: CAPTURE_BLOCK_TOKENS,
    blocks: promptBlockHashes(text, CAPTURE_BLOCK_TOKENS).map(blockHashHex),
    ...(e.backend !== undefined ? { backend: e.backend } : {}),
    ...(e.ttftMs !== undefined ? { ttftS: r3(e.ttftMs / 1000) } : {}),
    e2eS: r3(e.e2eMs / 1000),
    status: e.status,
  });
}

describe('captureLine (built by hand) writes what JSON.stringify wrote', () => {
  it('byte for byte, for odd strings, odd numbers and absent fields', () => {
    // prettier-ignore
    const odd = ['"', '\\', '\n\t\r\b\f', '\u0000\u001f\u007f', 'é ü 漢字 🦙', '\ud800 lone', 'end \udfff', '</script>', ''];
    // prettier-ignore
    const nums = [0, -0, 1, 0.5, 0.0005, 0.0015, 1.0005, 2.675, 999.9995, 123456.789, -3.2, NaN, Infinity, -Infinity, 1e15, 4.5e15, 1e21, 2 ** 53];
    const cases: CaptureEntry[] = [];
    for (let i = 0; i < 400; i++) {
      const n = (k: number): number => nums[(i * 7 + k * 3) % nums.length]!;
      cases.push({
        arrivalMs: 1_000_000 + n(0) * 1000 + (i % 5 === 0 ? -5000 : i * 0.0931),
        model: odd[i % odd.length]! + (i % 3 ? 'llama' : ''),
        api: (['ollama-generate', 'ollama-chat', 'openai-completions', 'openai-chat'] as const)[i % 4]!,
        promptText: `${odd[(i + 3) % odd.length]!}${'shared system prompt '.repeat(i % 40)}q${i}`,
        promptTokens: i % 6 === 0 ? undefined : n(1),
        outputTokens: i % 7 === 0 ? undefined : n(2),
        maxTokens: i % 4 === 0 ? undefined : n(3),
        sessionKey: i % 5 === 0 ? undefined : i % 5 === 1 ? '' : `${odd[i % odd.length]!}u${i % 9}`,
        backend: i % 6 === 0 ? undefined : odd[(i + 1) % odd.length]!,
        ttftMs: i % 8 === 0 ? undefined : n(4) * 1000 + (i % 11) * 0.37,
        e2eMs: n(5) * 1000 + (i % 13) * 1.0005,
        status: i % 9 === 0 ? NaN : 200 + (i % 4) * 100,
      });
    }
    for (const e of cases)
      for (const prompts of [false, true])
        assert.equal(captureLine(e, 1_000_000, prompts), referenceLine(e, 1_000_000, prompts));
  });

  it('jsonSeconds3 is JSON.stringify(Math.round(x · 1000) / 1000)', () => {
    const ref = (x: number): string => JSON.stringify(Math.round(x * 1000) / 1000);
    const xs = [
      0,
      -0,
      0.0004,
      -0.0004,
      0.0005,
      -0.0005,
      0.0015,
      1.0005,
      1.1,
      2.675,
      1e9 + 0.1234,
      999_999_999_999.999,
    ];
    xs.push(1e12, 1e12 + 0.5, 4e12 + 0.001, 1e15, 1e21, 1e300, NaN, Infinity, -Infinity, Number.MAX_VALUE);
    for (let i = -20_000; i < 200_000; i += 3) xs.push(i * 0.000137, i * 0.0931, i * 13.7031);
    for (const x of xs) assert.equal(jsonSeconds3(x), ref(x), `x = ${x}`);
  });

  it('blockHex is blockHashHex for every 53-bit hash', () => {
    const hs = [0, 1, 15, 16, 0xfffffff, 0x10000000, 0x10000001, 2 ** 52, 2 ** 53 - 1, 2 ** 53 - 2 ** 28];
    hs.push(...promptBlockHashes('the quick brown fox jumps over the lazy dog. '.repeat(400), 16));
    for (const h of hs) assert.equal(blockHex(h), blockHashHex(h), `h = ${h}`);
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
