/** Runs `fn` with stdout captured (command tests read what a command prints). */
export async function captured<T>(fn: () => Promise<T>): Promise<{ value: T; out: string }> {
  const writes: string[] = [];
  const orig = process.stdout.write.bind(process.stdout);
  process.stdout.write = ((s: string | Uint8Array) => (
    writes.push(String(s)),
    true
  )) as typeof process.stdout.write;
  try {
    return { value: await fn(), out: writes.join('') };
  } finally {
    process.stdout.write = orig;
  }
}
