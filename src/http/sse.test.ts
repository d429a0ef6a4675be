import { test } from 'node:test';
import assert from 'node:assert/strict';
import { sseEventObject } from './sse.js';

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
