import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SseDecoder, sseEventObject } from './sse.js';

test('sseEventObject: the data line(s) of an event as an object; LF or CRLF; one space after the colon', () => {
  assert.deepEqual(sseEventObject('data: {"a":1}'), { a: 1 });
  assert.deepEqual(sseEventObject('event: x\r\ndata:{"a":\r\ndata: 2}\r\n'), { a: 2 });
  assert.deepEqual(sseEventObject('id: 3\ndata: {"choices":[]}'), { choices: [] });
});

test('sseEventObject: nothing for no data, [DONE], bad JSON or a non-object', () => {
  for (const e of [
    'event: ping',
    'data: [DONE]',
    'data: {"a":',
    'data: [1]',
    'data: null',
    'data: 7',
    ': comment',
  ])
    assert.equal(sseEventObject(e), undefined, e);
});

test('SseDecoder: whole events whatever the chunking, LF or CRLF blank lines, UTF-8 split between chunks', () => {
  const text = 'data: {"t":"é€"}\n\nevent: x\r\ndata: {"a":1}\r\n\r\ndata: [DONE]\n\n';
  const bytes = Buffer.from(text);
  const whole = new SseDecoder().push(bytes);
  assert.deepEqual(whole, ['data: {"t":"é€"}', 'event: x\r\ndata: {"a":1}\r', 'data: [DONE]']);
  for (let size = 1; size <= 7; size++) {
    const d = new SseDecoder();
    const got: string[] = [];
    for (let i = 0; i < bytes.length; i += size) got.push(...d.push(bytes.subarray(i, i + size)));
    assert.deepEqual(got, whole, `chunks of ${size}`);
    assert.equal(d.end(), undefined);
  }
  assert.deepEqual(sseEventObject(whole[0]!), { t: 'é€' });
  assert.deepEqual(sseEventObject(whole[1]!), { a: 1 });
});

test('SseDecoder.end: a last event without its blank line', () => {
  const d = new SseDecoder();
  assert.deepEqual(d.push(Buffer.from('data: {"a":1}\n\ndata: {"b":2}')), ['data: {"a":1}']);
  assert.equal(d.end(), 'data: {"b":2}');
});
