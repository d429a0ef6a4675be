// Copy non-TypeScript files that ship inside dist (Lua scripts, dashboard assets, SQL migrations).
import { cpSync, existsSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

const exts = ['.lua', '.sql', '.html', '.css', '.js', '.json'];
function walk(dir) {
  for (const e of readdirSync(dir)) {
    const p = join(dir, e);
    if (statSync(p).isDirectory()) walk(p);
    else if (exts.some((x) => p.endsWith(x)) && !p.endsWith('.ts')) {
      const to = join('dist', relative('src', p));
      cpSync(p, to);
    }
  }
}
if (existsSync('src')) walk('src');
