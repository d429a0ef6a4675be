import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { countTokens } from '../engine/tokens.js';
import {
  memorySource,
  parseTrace,
  guessTraceFormat,
  replayLines,
  TraceError,
  traceWorkload,
} from './trace.js';
import { azureTime } from './trace-azure.js';
import { chainBlockIds, engineBlockHashes, standInText, uniqueState } from './trace-blocks.js';

function file(text: string): string {
  const p = join(mkdtempSync(join(tmpdir(), 'llmlb-trace-')), 'trace.jsonl');
  writeFileSync(p, text);
  return p;
}

const TRACE = [
  '{"at": 1.5, "prompt": "hello there", "outputTokens": 12, "sessionKey": "u1", "label": "chat"}',
  '',
  '{"at": 0.5, "api": "openai-chat", "messages": [{"role": "user", "content": "hi"}], "outputTokens": 3}',
  '{"at": 2, "id": "big", "promptTokens": 300, "outputTokens": 40, "model": "m2", "maxTokens": 30}',
  '{"at": 0.5, "prompt": "same time, later line", "outputTokens": 1}',
].join('\n');

describe('trace', () => {
  it('replays lines sorted by time (ties in file order), with defaults and synthetic prompts', () => {
    const rs = traceWorkload({ path: file(TRACE), model: 'm1' }, 1).start();
    assert.deepEqual(
      rs.map((s) => [s.at, s.request.id]),
      [
        [0.5, 'l3'],
        [0.5, 'l5'],
        [1.5, 'l1'],
        [2, 'big'],
      ],
    );
    const [chat, , gen, big] = rs.map((s) => s.request);
    assert.deepEqual(chat!.messages, [{ role: 'user', content: 'hi' }]);
    assert.equal(gen!.prompt, 'hello there');
    assert.equal(gen!.model, 'm1');
    assert.equal(gen!.sessionKey, 'u1');
    assert.equal(gen!.label, 'chat');
    assert.equal(big!.model, 'm2');
    assert.equal(big!.maxTokens, 30);
    assert.equal(countTokens(big!.prompt!), 300);
  });

  it('rateScale, limit and durationS', () => {
    const p = file(TRACE);
    assert.deepEqual(
      traceWorkload({ path: p, rateScale: 2 }, 1)
        .start()
        .map((s) => s.at),
      [0.25, 0.25, 0.75, 1],
    );
    assert.equal(traceWorkload({ path: p, limit: 2 }, 1).start().length, 2);
    assert.equal(traceWorkload({ path: p, durationS: 2 }, 1).start().length, 3);
  });

  it('errors name the line and the field', () => {
    const bad = (text: string, re: RegExp) => {
      assert.throws(
        () => parseTrace(text, 't.jsonl'),
        (e: unknown) => e instanceof TraceError && re.test(e.message),
      );
    };
    bad(
      '{"at": 0, "prompt": "x", "outputTokens": 1}\n{"at": -1, "prompt": "x", "outputTokens": 1}',
      /^t\.jsonl:2: at: /,
    );
    bad('{"at": 0, "prompt": "x"}', /^t\.jsonl:1: outputTokens: /);
    bad('{"at": 0, "outputTokens": 1}', /^t\.jsonl:1: prompt: give prompt, messages or promptTokens/);
    bad('{"at": 0, "prompt": "x", "outputTokens": 1, "colour": 1}', /^t\.jsonl:1: colour: /);
    bad(
      '{"at": 0, "prompt": "x", "outputTokens": 1, "id": "a"}\n{"at": 0, "prompt": "x", "outputTokens": 1, "id": "a"}',
      /:2: id: duplicate/,
    );
    bad('not json', /^t\.jsonl:1: not JSON/);
  });

  it('same seed → identical output', () => {
    const p = file(TRACE);
    assert.deepEqual(traceWorkload({ path: p }, 1).start(), traceWorkload({ path: p }, 1).start());
  });
});

function fileNamed(name: string, text: string): string {
  const p = join(mkdtempSync(join(tmpdir(), 'llmlb-trace-')), name);
  writeFileSync(p, text);
  return p;
}

// Each public format's exact shape (header and columns as the published files have them).
const MOONCAKE = [
  '{"timestamp": 0, "input_length": 1200, "output_length": 20, "hash_ids": [0, 1, 2]}',
  '{"timestamp": 1500, "input_length": 1100, "output_length": 0, "hash_ids": [0, 1, 3]}',
  '{"timestamp": 2250, "input_length": 300, "output_length": 7, "hash_ids": [9]}',
].join('\n');
const AZURE = [
  'TIMESTAMP,ContextTokens,GeneratedTokens',
  '2023-11-16 18:15:46.6805900,374,44',
  '2023-11-16 18:15:50.9951690,396,109',
  '2023-11-16 18:15:51.1000000,2048,1',
].join('\r\n');
const BURSTGPT = [
  'Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type',
  '5,ChatGPT,472,18,490,Conversation log',
  '45,GPT-4,1087,62,1149,API log',
  '46,ChatGPT,12,0,12,Conversation log',
].join('\n');

describe('trace importers', () => {
  it('guesses each format from its first line', () => {
    assert.equal(guessTraceFormat(fileNamed('a.jsonl', MOONCAKE)).name, 'mooncake');
    assert.equal(guessTraceFormat(fileNamed('a.csv', AZURE)).name, 'azure');
    assert.equal(guessTraceFormat(fileNamed('b.csv', BURSTGPT)).name, 'burstgpt');
    assert.equal(guessTraceFormat(fileNamed('c.jsonl', TRACE)).name, 'llmlb');
    assert.throws(() => guessTraceFormat(fileNamed('d.csv', 'x,y\n1,2')), /:1: cannot tell the trace format/);
  });

  it('lines in memory replay as the same lines in a file; errors name the source', () => {
    for (const text of [MOONCAKE, TRACE, AZURE]) {
      const lines = text.split('\n');
      const params = { rateScale: 2, model: 'm1' };
      assert.deepEqual(
        replayLines(memorySource('gen', lines), params, 3).start(),
        traceWorkload({ path: fileNamed('same.txt', text), ...params }, 3).start(),
      );
    }
    assert.throws(
      () => replayLines(memorySource('gen', ['{"timestamp": 1, "hash_ids": []}']), {}, 1).start(),
      (e: unknown) => e instanceof TraceError && e.message.startsWith('gen:1: input_length:'),
    );
  });

  it('mooncake: ms timestamps, exact lengths, shared hash_ids → shared stand-in prefix and engine blocks', () => {
    const rs = traceWorkload({ path: fileNamed('m.jsonl', MOONCAKE) }, 1).start();
    assert.deepEqual(
      rs.map((s) => [s.at, s.request.promptTokens, s.request.outputTokens]),
      [
        [0, 1200, 20],
        [1.5, 1100, 1],
        [2.25, 300, 7],
      ],
    );
    const [a, b, c] = rs.map((s) => s.request);
    // One stand-in char per 8 tokens; 1024 shared tokens = 128 shared chars, then they differ.
    assert.equal(a!.prompt!.length, 150);
    assert.equal(a!.prompt!.slice(0, 128), b!.prompt!.slice(0, 128));
    assert.notEqual(a!.prompt!.slice(128, 136), b!.prompt!.slice(128, 136));
    assert.notEqual(a!.prompt!.slice(0, 8), c!.prompt!.slice(0, 8));
    // Engine blocks of 16 tokens: 64 shared (two 512-token blocks), then different.
    const ha = engineBlockHashes(a!.prefixBlocks!, 1200, a!.tailState!, 16);
    const hb = engineBlockHashes(b!.prefixBlocks!, 1100, b!.tailState!, 16);
    assert.equal(ha.length, 75);
    assert.equal(hb.length, 68);
    assert.deepEqual(ha.slice(0, 64), hb.slice(0, 64));
    assert.ok(ha.slice(64).every((h) => !hb.includes(h)));
    assert.equal(new Set(ha).size, ha.length);
  });

  it('azure: dates rebased to the first row, CRLF lines', () => {
    const rs = traceWorkload({ path: fileNamed('a.csv', AZURE) }, 1).start();
    assert.deepEqual(
      rs.map((s) => [Number(s.at.toFixed(6)), s.request.promptTokens, s.request.outputTokens]),
      [
        [0, 374, 44],
        [4.314579, 396, 109],
        [4.41941, 2048, 1],
      ],
    );
    // No shared blocks: every stand-in is its own.
    assert.notEqual(rs[0]!.request.prompt!.slice(0, 8), rs[1]!.request.prompt!.slice(0, 8));
    assert.equal(azureTime('2023-11-16 18:15:46.5'), Date.UTC(2023, 10, 16, 18, 15, 46) / 1000 + 0.5);
  });

  it('burstgpt: seconds, model and log type as label, failed answers as one token', () => {
    const rs = traceWorkload({ path: fileNamed('b.csv', BURSTGPT), api: 'openai-chat' }, 1).start();
    assert.deepEqual(
      rs.map((s) => [s.at, s.request.promptTokens, s.request.outputTokens, s.request.label]),
      [
        [5, 472, 18, 'ChatGPT conversation'],
        [45, 1087, 62, 'GPT-4 api'],
        [46, 12, 1, 'ChatGPT conversation'],
      ],
    );
    assert.equal(rs[0]!.request.messages!.length, 1);
  });

  it('llmlb captured lines: blocks and lengths, no text', () => {
    const cap = [
      '{"at": 0.5, "model": "m", "api": "ollama-chat", "promptTokens": 200, "outputTokens": 5, "blockTokens": 64, "blocks": ["aa", "bb", "cc"], "sessionKey": "k1", "backend": "b0", "ttftS": 0.2, "e2eS": 1.1, "status": 200}',
      '{"at": 0.7, "model": "m", "api": "ollama-chat", "promptTokens": 130, "outputTokens": 9, "blockTokens": 64, "blocks": ["aa", "bb"], "status": 200}',
    ].join('\n');
    const rs = traceWorkload({ path: fileNamed('cap.jsonl', cap) }, 1).start();
    const [a, b] = rs.map((s) => s.request);
    assert.equal(a!.promptTokens, 200);
    assert.equal(a!.sessionKey, 'k1');
    assert.equal(a!.messages![0]!.content.length, 25);
    assert.equal(a!.messages![0]!.content.slice(0, 16), b!.messages![0]!.content.slice(0, 16));
    assert.throws(
      () => parseTrace('{"at": 0, "outputTokens": 1, "prompt": "x", "blocks": ["a"]}', 't'),
      /t:1: promptTokens: blocks need promptTokens/,
    );
  });

  it('malformed lines: an error naming file, line and field, or skipped and counted', () => {
    const cases: [string, string, RegExp][] = [
      [
        'm.jsonl',
        MOONCAKE + '\n{"timestamp": 3000, "input_length": "x", "output_length": 1}',
        /m\.jsonl:4: input_length: /,
      ],
      [
        'm.jsonl',
        MOONCAKE + '\n{"timestamp": 3000, "input_length": 5, "output_length": 1, "hash_ids": [1.5]}',
        /:4: hash_ids: /,
      ],
      [
        'm.jsonl',
        '{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": []}\n{"timestamp": 1, ',
        /:2: not JSON/,
      ],
      ['a.csv', AZURE + '\r\n2023-11-16 18:15:52.0,12', /a\.csv:5: expected 3 columns/],
      [
        'a.csv',
        AZURE + '\r\n2023-11-16 18:15:52.0,12,-3',
        /a\.csv:5: GeneratedTokens: expected a non-negative integer/,
      ],
      ['a.csv', AZURE + '\r\nyesterday,12,3', /a\.csv:5: TIMESTAMP: /],
      ['b.csv', BURSTGPT + '\n47,ChatGPT,ten,1,11,API log', /b\.csv:5: Request tokens: /],
      [
        'b.csv',
        'Timestamp,Model,Request tokens,Total tokens\n1,a,2,3',
        /b\.csv:1: header lacks column 'Response tokens'/,
      ],
    ];
    for (const [name, text, re] of cases) {
      const path = fileNamed(name, text);
      const format = name === 'b.csv' ? 'burstgpt' : undefined;
      assert.throws(
        () => traceWorkload({ path, format }, 1),
        (e: unknown) => e instanceof TraceError && re.test(e.message),
      );
    }
    const bad = fileNamed(
      'm.jsonl',
      MOONCAKE + '\nnot json\n{"timestamp": 4000, "input_length": 1, "output_length": 1}\n{}',
    );
    const replay = traceWorkload({ path: bad, skipBad: true }, 1);
    assert.equal(replay.start().length, 4);
    assert.equal(replay.stats.skipped, 2);
    assert.match(replay.stats.firstBad!, /:4: not JSON/);
  });

  it('the check pass counts what a full pass builds; in-order traces replay alike without the window', () => {
    const cap = [
      '{"at": 0.5, "model": "m", "promptTokens": 200, "outputTokens": 5, "blocks": ["aa", "bb", "cc"]}',
      '{"at": 0.6, "promptTokens": 70, "outputTokens": 2}',
      '{"at": 0.7, "model": "m2", "api": "openai-chat", "promptTokens": 130, "outputTokens": 9, "blocks": ["aa"]}',
      '{"at": 0.9, "prompt": "hello there", "outputTokens": 4}',
    ].join('\n');
    const shuffled = [MOONCAKE.split('\n')[1], MOONCAKE.split('\n')[0], MOONCAKE.split('\n')[2]].join('\n');
    const cases: [string, string, boolean][] = [
      ['m.jsonl', MOONCAKE, true],
      ['cap.jsonl', cap, true],
      ['t.jsonl', TRACE, false],
      ['s.jsonl', shuffled, false],
      ['a.csv', AZURE, true],
    ];
    for (const [name, text, inOrder] of cases) {
      const path = fileNamed(name, text);
      for (const params of [{ path }, { path, sample: 0.5 }, { path, limit: 2, rateScale: 3 }]) {
        const checked = traceWorkload(params, 4);
        const counted = { ...checked.stats };
        const full = checked.start();
        // start() builds every request; its stats are the counting pass's, field for field.
        assert.deepEqual(checked.stats, counted, name);
        // (Sampling may drop the line out of order.)
        if (!('sample' in params)) assert.equal(counted.inOrder, inOrder, name);
        assert.ok(counted.promptTokens > 0 && counted.requests === full.length, name);
        if (counted.inOrder) {
          const direct = traceWorkload(params, 4, { check: false, inOrder: true });
          assert.deepEqual(direct.start(), full, name);
          const it = direct.stream();
          const streamed = [];
          for (let r = it.next(); !r.done; r = it.next()) streamed.push(r.value);
          assert.deepEqual(streamed, full, name);
        }
      }
    }
  });

  it('time window, sampling and limit; streamed like start()', () => {
    const lines = Array.from(
      { length: 200 },
      (_, i) => `{"timestamp": ${i * 100}, "input_length": 64, "output_length": 4, "hash_ids": [${i}]}`,
    );
    const path = fileNamed('m.jsonl', lines.join('\n'));
    const win = traceWorkload({ path, startS: 5, endS: 10 }, 1).start();
    assert.equal(win.length, 50);
    assert.equal(win[0]!.at, 0);
    assert.equal(win[0]!.request.id, 'l51');
    const half = traceWorkload({ path, sample: 0.5 }, 1).start();
    assert.ok(half.length > 70 && half.length < 130, `sampled ${half.length}`);
    assert.deepEqual(
      traceWorkload({ path, sample: 0.5 }, 1)
        .start()
        .map((s) => s.request.id),
      half.map((s) => s.request.id),
    );
    assert.equal(traceWorkload({ path, limit: 7, rateScale: 10 }, 1).start().at(-1)!.at, 0.06);
    const replay = traceWorkload({ path, durationS: 3 }, 1);
    const streamed: string[] = [];
    const it = replay.stream();
    for (let r = it.next(); !r.done; r = it.next()) streamed.push(r.value.request.id);
    assert.deepEqual(
      streamed,
      replay.start().map((s) => s.request.id),
    );
    assert.equal(streamed.length, 30);
    assert.equal(replay.stats.promptTokens, 30 * 64);
  });
});

describe('engine block hashes of trace blocks', () => {
  it('cached and direct paths agree; any engine block size', () => {
    const blocks = { blockTokens: 512, chain: chainBlockIds([5, 6, 7]) };
    const other = { blockTokens: 512, chain: chainBlockIds([5, 6, 8]) };
    for (const size of [16, 24, 100, 512, 700]) {
      const a = engineBlockHashes(blocks, 1500, 11, size);
      const b = engineBlockHashes(other, 1500, 12, size);
      assert.equal(a.length, Math.floor(1500 / size));
      // Blocks ending within the first 1024 tokens are shared, the rest are not.
      const shared = Math.floor(1024 / size);
      assert.deepEqual(a.slice(0, shared), b.slice(0, shared), `size ${size}`);
      for (let e = shared; e < a.length; e++) assert.notEqual(a[e], b[e], `size ${size} block ${e}`);
      assert.deepEqual(engineBlockHashes(blocks, 1500, 11, size), a);
    }
  });

  it('equal the reference: a plain mix per block, a word string per block joined', () => {
    // The first implementation (one mix() call per engine block, strings per block), kept here as
    // the definition the fast paths (state's half of mix hoisted, one byte buffer) must match.
    const mix = (state: number, value: number): number => {
      const lo = state >>> 0;
      const hi = Math.floor(state / 0x100000000) >>> 0;
      let h1 = 0xdeadbeef ^ lo ^ value;
      let h2 = 0x41c6ce57 ^ hi ^ Math.floor(value / 0x100000000);
      h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909);
      h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909);
      return (h2 >>> 0) * 0x200000 + ((h1 >>> 0) & 0x1fffff);
    };
    const refHashes = (chain: number[], blockTokens: number, prompt: number, tail: number, size: number) => {
      const n = Math.floor(prompt / size);
      const out: number[] = [];
      for (let e = 0; e < n; e++) {
        const k = Math.floor(((e + 1) * size - 1) / blockTokens);
        const off = (e + 1) * size - k * blockTokens;
        out.push(mix(k < chain.length ? chain[k]! : mix(tail, k), off));
      }
      return out;
    };
    const A = 'abcdefghijklmnopqrstuvwxyz234567';
    const chars = (state: number, n: number): string => {
      let word = '';
      let v = state;
      for (let i = 0; i < 10; i++) {
        word += A[v % 32];
        v = Math.floor(v / 32);
      }
      return n <= 10 ? word.slice(0, n) : word.repeat(Math.ceil(n / 10)).slice(0, n);
    };
    const refText = (chain: number[], blockTokens: number, prompt: number, tail: number): string => {
      let text = '';
      let covered = 0;
      for (let i = 0; i < chain.length && covered < prompt; i++) {
        const tokens = Math.min(blockTokens, prompt - covered);
        text += chars(chain[i]!, Math.ceil(tokens / 8));
        covered += tokens;
      }
      if (covered < prompt) text += chars(tail, Math.ceil((prompt - covered) / 8));
      return text;
    };
    let x = 12345;
    const rnd = (n: number): number => {
      x = (Math.imul(x, 1103515245) + 12345) >>> 0;
      return x % n;
    };
    for (let trial = 0; trial < 300; trial++) {
      const blockTokens = [16, 64, 512, 100, 7][trial % 5]!;
      const ids = Array.from({ length: rnd(12) }, () => (rnd(4) === 0 ? 2 ** 40 + rnd(1000) : rnd(50)));
      const chain = chainBlockIds(ids);
      const prompt = rnd(blockTokens * 14 + 3);
      const tail = uniqueState(`r${trial}`, trial);
      const blocks = { blockTokens, chain };
      assert.equal(standInText(blocks, prompt, tail), refText(chain, blockTokens, prompt, tail));
      for (const size of [1, 16, 24, 100, 512, 700])
        assert.deepEqual(
          engineBlockHashes(blocks, prompt, tail, size),
          refHashes(chain, blockTokens, prompt, tail, size),
          `trial ${trial} size ${size}`,
        );
    }
    // A prompt far longer than any before: the scratch buffer grows and keeps what it holds.
    const long = { blockTokens: 512, chain: chainBlockIds([1, 2, 3]) };
    assert.equal(standInText(long, 200_000, 9), refText(long.chain, 512, 200_000, 9));
  });
});
