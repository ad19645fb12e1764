export * from './guardrail';
export * from './policy-request';
export * from './effective';
