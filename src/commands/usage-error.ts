/** Bad command-line arguments: the CLI prints the message and exits 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}
