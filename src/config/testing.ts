import assert from 'node:assert/strict';
import { ConfigError, parseConfig, type ConfigIssue, type ParseOptions } from './load.js';

/** The issues a config text is rejected with (config tests); fails the test if it is accepted. */
export function configIssues(text: string, opts: ParseOptions): ConfigIssue[] {
  try {
    parseConfig(text, opts);
  } catch (err) {
    assert.ok(err instanceof ConfigError, String(err));
    return [...err.issues];
  }
  assert.fail('expected a ConfigError');
}
