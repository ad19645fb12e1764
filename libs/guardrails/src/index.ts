export * from './guardrail';
export * from './policy-request';
export * from './effective';
export * from './read-models/guardrails';
export * from './read-models/budget-spend';
