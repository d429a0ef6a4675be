// Start each build from an empty dist, so files whose sources left the build (tests, test helpers) go too.
import { rmSync } from 'node:fs';

rmSync('dist', { recursive: true, force: true });
