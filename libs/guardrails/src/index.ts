export { BUILTIN_LABELS, BUILTIN_SLUGS, PROMPT_INJECTION_INTENTS, luhnValid, type BuiltinSlug } from './content/builtins';
export * from './content/policy';
export * from './content/scan';
