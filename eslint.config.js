import { readdirSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { fileURLToPath } from 'node:url';
import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

// ARCHITECTURE.md's layer table, top to bottom: each layer imports only from the layers above it.
// A folder (or file) of src/ is in exactly one layer; a new one goes in the table and here.
// Exported so test/architecture-layers.test.ts can hold ARCHITECTURE.md's layer table to this list.
export const LAYERS = [
  { name: 'core', folders: ['core'], files: [] },
  {
    name: 'models',
    folders: ['api', 'engine', 'workloads', 'config', 'scenario', 'http', 'report', 'rl'],
    files: ['log'],
  },
  {
    name: 'hosts',
    folders: [
      'sim',
      'proxy',
      'fleet',
      'admission',
      'state',
      'federation',
      'dashboard',
      'trace',
      'metrics',
      'tasks',
      'live-bench',
      'epp',
    ],
    files: [],
  },
  { name: 'commands', folders: ['commands'], files: [] },
  { name: 'cli', folders: [], files: ['cli'] },
];
// A folder or file of src/ missing from the table would go unchecked: lint stops and says so.
for (const e of readdirSync(new URL('src', import.meta.url), { withFileTypes: true })) {
  const name = e.isDirectory() ? e.name : e.name.split('.')[0];
  if (!LAYERS.some((l) => (e.isDirectory() ? l.folders : l.files).includes(name)))
    throw new Error(`eslint.config.js: src/${e.name} is in no layer of LAYERS (and ARCHITECTURE.md's table)`);
}
// How many folders deep a .ts file of src/ sits (src/core/policies/scorers/x.ts: 3).
const MAX_DEPTH = Math.max(
  ...readdirSync(new URL('src', import.meta.url), { recursive: true })
    .filter((p) => p.endsWith('.ts'))
    .map((p) => p.split(/[\\/]/).length - 1),
);

/**
 * `no-restricted-imports` for one layer: a relative import is matched by its text, so each depth
 * below src/ gets its own config whose `../` count lands exactly in src/ — from there the next
 * name says which layer the import reaches.
 */
function layerRules() {
  const configs = [];
  LAYERS.forEach((layer, i) => {
    const below = LAYERS.slice(i + 1);
    if (below.length === 0) return;
    const folders = below.flatMap((l) => l.folders);
    const files = below.flatMap((l) => l.files);
    const names = below.map((l) => l.name).join(', ');
    const message = `layers (ARCHITECTURE.md): the ${layer.name} layer never imports ${names}.`;
    const target = [
      ...(folders.length > 0 ? [`(?:${folders.join('|')})(?:/|$)`] : []),
      ...(files.length > 0 ? [`(?:${files.join('|')})\\.js$`] : []),
    ].join('|');
    const at = (globs, up) => ({
      files: globs,
      rules: {
        'no-restricted-imports': [
          'error',
          {
            patterns: [
              { regex: `^${up}(?:${target})`, message },
              // The core is pure (no I/O, no clock): no Node built-in but the test runner's.
              ...(layer.name === 'core'
                ? [
                    {
                      regex: `^(?:node:)?(?:${builtinModules.filter((m) => !m.startsWith('assert')).join('|')})$`,
                      message: 'layers (ARCHITECTURE.md): the core is pure — no Node built-in (I/O, clock).',
                    },
                  ]
                : []),
            ],
          },
        ],
      },
    });
    const top = layer.files.flatMap((f) => [`src/${f}.ts`, `src/${f}.*.ts`]); // log.test.ts too
    if (top.length > 0) configs.push(at(top, '\\./'));
    for (let d = 1; d <= MAX_DEPTH && layer.folders.length > 0; d++)
      configs.push(
        at(
          layer.folders.map((f) => `src/${f}/${'*/'.repeat(d - 1)}*.ts`),
          '(?:\\.\\./){' + d + '}',
        ),
      );
  });
  return configs;
}

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'out/**', 'bench-out/**', 'src/dashboard/assets/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-constant-condition': ['error', { checkLoops: false }],
    },
  },
  {
    files: ['**/*.js', '**/*.mjs'],
    languageOptions: { globals: globals.node },
  },
  // Type-aware promise rules only: an un-awaited promise whose rejection escapes (issue #9) is a
  // crash. Each file gets the tsconfig.json nearest to it (src/, test/, bench/, scripts/).
  {
    files: ['src/**/*.ts', 'test/**/*.ts', 'bench/**/*.ts', 'scripts/**/*.mjs'],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: fileURLToPath(new URL('.', import.meta.url)) },
    },
    rules: {
      // node:test reports a failing test itself: the promise test()/it()/describe() return never
      // rejects (a subtest its parent did not await fails as cancelled). `void` is no way out: a
      // fire-and-forget promise needs a .catch or a rejection handler.
      '@typescript-eslint/no-floating-promises': [
        'error',
        {
          allowForKnownSafeCalls: [
            { from: 'package', package: 'node:test', name: ['test', 'it', 'describe', 'suite'] },
          ],
          ignoreVoid: false,
        },
      ],
      '@typescript-eslint/no-misused-promises': 'error',
    },
  },
  ...layerRules(),
  // Tests that must reach below their own layer: a core test against a workload's task mix, an
  // engine test against the fleet's metrics reader, a scenario test and a simulator test that
  // run the simulator / the simulate command on what they check.
  {
    files: [
      'src/core/estimators/output-length-model.test.ts',
      'src/engine/server.test.ts',
      'src/scenario/skylb.test.ts',
      'src/sim/simulator.test.ts',
    ],
    rules: { 'no-restricted-imports': 'off' },
  },
);
