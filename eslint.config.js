import { fileURLToPath } from 'node:url';
import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

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
);
