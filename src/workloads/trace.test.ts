import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { countTokens } from '../engine/tokens.js';
import { parseTrace, TraceError, traceWorkload } from './trace.js';

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
