export { BUILTIN_LABELS, BUILTIN_SLUGS, type BuiltinSlug } from './content/builtins';
export * from './content/policy';
export * from './content/scan';
