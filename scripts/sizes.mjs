// Issue #33's size targets: source files of src/ over ~500 lines, and functions in src/ over ~150
// lines (tests excluded). `node scripts/sizes.mjs [maxFileLines] [maxFunctionLines]`: a list, worst first.
// A file's reason for its length, if it gives one, is in its top comment: the report prints that
// comment's first line so a reader can judge.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';

const maxFile = Number(process.argv[2] ?? 500);
const maxFn = Number(process.argv[3] ?? 150);
const files = readdirSync('src', { recursive: true })
  .map((p) => join('src', String(p)))
  .filter((p) => p.endsWith('.ts') && !/\.test\.ts$|testing\.ts$/.test(p));

const long = [];
const fns = [];
for (const path of files) {
  const text = readFileSync(path, 'utf8');
  const lines = text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
  if (lines > maxFile) {
    const head = /^\s*\/\*\*?\s*\n?\s*\*?\s*(.*)/.exec(text)?.[1] ?? '(no top comment)';
    long.push({ path, lines, head: head.slice(0, 100) });
  }
  const sf = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
  const lineOf = (pos) => sf.getLineAndCharacterOfPosition(pos).line;
  const visit = (node, owner) => {
    let name = owner;
    if (
      ts.isFunctionDeclaration(node) ||
      ts.isMethodDeclaration(node) ||
      ts.isConstructorDeclaration(node) ||
      ts.isGetAccessor(node) ||
      ts.isFunctionExpression(node) ||
      ts.isArrowFunction(node)
    ) {
      const own =
        node.name?.getText(sf) ??
        (ts.isConstructorDeclaration(node) ? 'constructor' : undefined) ??
        (ts.isVariableDeclaration(node.parent) ? node.parent.name.getText(sf) : undefined) ??
        (ts.isPropertyAssignment(node.parent) ? node.parent.name.getText(sf) : undefined) ??
        '(anonymous)';
      const cls =
        node.parent && ts.isClassLike(node.parent) && node.parent.name ? `${node.parent.name.text}.` : '';
      name = owner ? `${owner} > ${cls}${own}` : `${cls}${own}`;
      const n = lineOf(node.getEnd()) - lineOf(node.getStart(sf)) + 1;
      if (n > maxFn) fns.push({ path, name, lines: n, line: lineOf(node.getStart(sf)) + 1 });
    }
    ts.forEachChild(node, (c) => visit(c, name));
  };
  visit(sf, '');
}
long.sort((a, b) => b.lines - a.lines);
fns.sort((a, b) => b.lines - a.lines);
console.log(`files over ${maxFile} lines (${long.length}):`);
for (const f of long) console.log(`  ${String(f.lines).padStart(5)}  ${f.path}  — ${f.head}`);
console.log(`functions over ${maxFn} lines (${fns.length}; a nested one is listed inside its owner too):`);
for (const f of fns) console.log(`  ${String(f.lines).padStart(5)}  ${f.path}:${f.line}  ${f.name}`);
