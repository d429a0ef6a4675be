/** Bad command-line arguments: the CLI prints the message and exits 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

/**
 * The command could not do its job for a reason outside the program (a server that cannot be
 * reached, a model it lacks): the CLI prints `llmlb COMMAND: message` on one line and exits 1.
 */
export class CommandError extends Error {
  override readonly name = 'CommandError';
}
