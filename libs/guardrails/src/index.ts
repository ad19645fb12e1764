export * from './guardrail';
export * from './policy-request';
export * from './effective';
export * from './read-models/guardrails';
export * from './read-models/budget-spend';
export { BUILTIN_LABELS, BUILTIN_SLUGS, type BuiltinSlug } from './content/builtins';
export * from './content/policy';
export * from './content/scan';
