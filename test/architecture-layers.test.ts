/**
 * ARCHITECTURE.md's layer table and eslint.config.js's LAYERS (which lint enforces) must say the
 * same thing: the same layers, in the same order, with the same folders and top-level files. A
 * folder moved in one and not the other would leave the docs describing rules lint does not check.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

interface Layer {
  name: string;
  folders: string[];
  files: string[];
}

/** The table's rows: layer name (bold), then `src/x/` folders and `src/x.ts` files in the second cell. */
function tableLayers(doc: string): Layer[] {
  const start = doc.indexOf('## Layers');
  assert.ok(start >= 0, 'ARCHITECTURE.md has a "## Layers" section');
  const end = doc.indexOf('\n## ', start + 1);
  const rows = doc
    .slice(start, end < 0 ? undefined : end)
    .split('\n')
    .filter((l) => /^\|\s*\*\*/.test(l));
  return rows.map((row) => {
    const cells = row.split('|').map((c) => c.trim());
    const name = /\*\*(\w[\w-]*)\*\*/.exec(cells[1] ?? '')?.[1] ?? '';
    const paths = [...(cells[2] ?? '').matchAll(/`src\/([^`]+)`/g)].map((m) => m[1] ?? '');
    return {
      name,
      folders: paths.filter((p) => p.endsWith('/')).map((p) => p.slice(0, -1)),
      files: paths.filter((p) => p.endsWith('.ts')).map((p) => p.slice(0, -3)),
    };
  });
}

test("ARCHITECTURE.md's layer table lists exactly eslint.config.js's LAYERS, in order", async () => {
  // By URL: the config is plain JS with no declarations; its LAYERS is checked by shape below.
  const { LAYERS } = (await import(new URL('../eslint.config.js', import.meta.url).href)) as {
    LAYERS: Layer[];
  };
  const doc = tableLayers(readFileSync('ARCHITECTURE.md', 'utf8'));
  const norm = (ls: Layer[]) =>
    ls.map((l) => ({ name: l.name, folders: [...l.folders].sort(), files: [...l.files].sort() }));
  assert.ok(doc.length >= 5, `the table has its rows (found ${doc.length})`);
  assert.deepEqual(norm(doc), norm(LAYERS));
});
