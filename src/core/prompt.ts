/**
 * The text a request asks about, as the core sees it: chat messages flattened in order, a prompt as
 * is. The same flattening is used by the router (prefix and character-count policies) and the
 * emulated engine (prompt tokens, prefix-cache blocks), so both agree on what "the prompt" is.
 */

/** Text of one message's content: a string, or OpenAI content parts (text parts joined). */
function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    let out = '';
    for (const part of content) {
      if (typeof part === 'string') out += part;
      else if (part && typeof part === 'object' && typeof (part as { text?: unknown }).text === 'string') {
        out += (part as { text: string }).text;
      }
    }
    return out;
  }
  return '';
}

/** Messages' contents joined in order with '\n'. Non-message entries contribute nothing. */
export function flattenMessages(messages: readonly unknown[]): string {
  let out = '';
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i];
    if (i > 0) out += '\n';
    if (m && typeof m === 'object') out += contentText((m as { content?: unknown }).content);
  }
  return out;
}

/** A completions prompt: a string, or an array of strings joined with '\n'. */
export function promptText(prompt: unknown): string {
  if (typeof prompt === 'string') return prompt;
  if (Array.isArray(prompt)) return prompt.filter((p): p is string => typeof p === 'string').join('\n');
  return '';
}
