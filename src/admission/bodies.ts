import { z } from 'zod';

/** Request bodies of the admission API (the quota-aware router field names). Strict: a typo is a 400, not a default. */
export const scheduleBody = z.strictObject({
  estimated_tokens: z.number().int().min(1),
  model: z.string().min(1).optional(),
});

export const taskBody = z.strictObject({ task_id: z.string().min(1).max(200) });

export const quotaPatchBody = z
  .strictObject({
    weight: z.number().positive().optional(),
    maxConcurrent: z.number().int().min(0).optional(),
    tokensPerMinute: z.number().int().positive().optional(),
    requestsPerMinute: z.number().int().positive().optional(),
  })
  .refine(
    (b) => Object.keys(b).length > 0,
    'give at least one of weight, maxConcurrent, tokensPerMinute, requestsPerMinute',
  );

/** "estimated_tokens: Too small: expected number to be >=1" — field first, one line per problem. */
export function describeIssues(err: z.ZodError): string {
  return err.issues.map((i) => (i.path.length ? `${i.path.join('.')}: ${i.message}` : i.message)).join('; ');
}
