/**
 * Weighted deficit round robin across the models that could take a request now.
 *
 * The quota-aware router adds every weight to every deficit once per /schedule call, so a 1800-token request
 * with weight 1 would need 1800 calls before anything is admitted. Instead we run as many rounds
 * as the best candidate needs, in closed form: a model of weight w needing r rounds has
 * ceil((tokens − deficit) / (w·quantum)) of them; the fewest wins (ties: more deficit per weight,
 * then name), every eligible model receives those r rounds, and the winner pays `tokens`. Models
 * that can't take the request sit the rounds out, as idle flows do in DRR. Long-run token share
 * among always-eligible models follows the weights; deficits stay below max(tokens) + w·quantum.
 */
export interface DeficitCandidate {
  name: string;
  weight: number;
  deficit: number;
}

export interface WdrrPick {
  /** Index into the candidates array. */
  index: number;
  /** Rounds granted to every candidate before the winner pays. */
  rounds: number;
}

export function roundsNeeded(c: DeficitCandidate, tokens: number, quantumTokens: number): number {
  const short = tokens - c.deficit;
  return short <= 0 ? 0 : Math.ceil(short / (c.weight * quantumTokens));
}

export function pickWdrr(
  cands: readonly DeficitCandidate[],
  tokens: number,
  quantumTokens: number,
): WdrrPick | null {
  let best = -1;
  let bestRounds = Infinity;
  let bestScore = -Infinity;
  for (let i = 0; i < cands.length; i++) {
    const c = cands[i]!;
    const r = roundsNeeded(c, tokens, quantumTokens);
    const score = (c.deficit + r * c.weight * quantumTokens - tokens) / c.weight;
    const better =
      r < bestRounds ||
      (r === bestRounds && (score > bestScore || (score === bestScore && c.name < cands[best]!.name)));
    if (better) {
      best = i;
      bestRounds = r;
      bestScore = score;
    }
  }
  return best < 0 ? null : { index: best, rounds: bestRounds };
}

/** Cap for a deficit after a refund: a reclaimed lease may not bank more than one request's worth. */
export function deficitCap(weight: number, quantumTokens: number, tokens: number): number {
  return weight * quantumTokens + tokens;
}
