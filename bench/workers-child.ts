/**
 * `llmlb serve --workers N` for the proxy benchmark: runServe as the CLI calls it (the primary
 * forks this same script as its workers). Usage: node bench/workers-child.js CONFIG N
 */
import { runServe } from '../src/commands/serve.js';

const [config, workers] = process.argv.slice(2);
if (config === undefined || workers === undefined) throw new Error('usage: workers-child.ts CONFIG N');
runServe({ config, workers: Number(workers) }).catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
