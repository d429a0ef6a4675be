/** The estimated-wait policy (the default) and its estimator; see policy.ts for what it does. */
export { estimatedWait, type EstimatedWaitPolicy } from './policy.js';
export { WaitEstimator } from './estimator.js';
export { EstimatedWaitParamsSchema, parseEstimatedWaitParams, type EstimatedWaitParams } from './params.js';
