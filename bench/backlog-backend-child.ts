/** The emulated models backend in its own process, so the bench's database work cannot delay its timers. */
import { startModelsBackend } from '../src/sim/backlog/models-backend.js';
import { BACKLOG_MODELS } from '../src/sim/backlog/scenario.js';

const timeScale = Number(process.argv[2] ?? 20);
const be = await startModelsBackend({ models: BACKLOG_MODELS, timeScale });
process.stdout.write(`backend ${be.url}\n`);
const stop = (): void => {
  be.close().then(
    () => process.exit(0),
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
process.on('disconnect', stop);
