/** The console's pages, in the order of the navigation; the hash (`#/keys`) names the page. */
export const ROUTES = [
  { path: 'overview', label: 'Overview' },
  { path: 'keys', label: 'Keys' },
  { path: 'presets', label: 'Presets' },
  { path: 'guardrails', label: 'Guardrails' },
  { path: 'webhook', label: 'Webhook' },
  { path: 'provider-keys', label: 'Provider keys' },
  { path: 'prompt-logs', label: 'Prompt logs' },
  { path: 'activity', label: 'Activity' },
  { path: 'audit-log', label: 'Audit log' },
  { path: 'organizations', label: 'Organizations' },
  { path: 'security', label: 'Security' },
] as const;

export type RoutePath = (typeof ROUTES)[number]['path'];

/** The page a location hash names, the overview for anything else. */
export function routeOf(hash: string): RoutePath {
  const path = hash.replace(/^#\/?/, '').split(/[?/]/)[0];
  return ROUTES.find((r) => r.path === path)?.path ?? 'overview';
}
