import { DomainError } from '@svc/platform';
import type { Budget, BudgetScope } from '@svc/ledger';
import type { GuardrailPolicy, GuardrailsState } from './guardrail';

/**
 * What applies to one request (issue 44): the workspace-wide guardrail, the member's and the
 * key's, widest first. Budgets stack (each is held against, ledger's account decider); access
 * rules intersect, so a member or key guardrail can narrow the organization's but never widen it.
 */
export interface AppliedGuardrail {
  id: string;
  scope: BudgetScope;
  subject: string;
  policy: GuardrailPolicy;
}

/** Who is calling: the key, and for a key of an organization the member who made it. */
export interface GuardedCaller {
  workspaceId: string;
  keyId: string;
  /** The organization member the key belongs to (its creator); null for an account's own keys. */
  memberId: string | null;
}

export function appliedGuardrails(state: GuardrailsState, caller: GuardedCaller): AppliedGuardrail[] {
  const applied: AppliedGuardrail[] = [];
  const add = (id: string | null | undefined, scope: BudgetScope, subject: string) => {
    const policy = id ? state.guardrails[id] : undefined;
    if (id && policy) applied.push({ id, scope, subject, policy });
  };
  add(state.organization, 'organization', caller.workspaceId);
  if (caller.memberId !== null) add(state.assignments.member[caller.memberId], 'member', caller.memberId);
  add(state.assignments.key[caller.keyId], 'key', caller.keyId);
  return applied;
}

/** The budgets to hold against; a BYOK request (the provider bills the caller) skips those that leave BYOK out. */
export function budgetsOf(applied: readonly AppliedGuardrail[], byok: boolean): Budget[] {
  return applied
    .filter(({ policy }) => policy.limit_nano !== null && (!byok || policy.include_byok_in_budgets))
    .map(({ id, scope, subject, policy }) => ({
      guardrailId: id,
      name: policy.name,
      scope,
      subject,
      limitNano: BigInt(policy.limit_nano!),
      reset: policy.reset_interval,
    }));
}

/** The intersection of the access rules that apply, with, for each narrowing, the guardrail that made it. */
export interface AccessPolicy {
  /** null: every model; else only these (catalog ids), each allowed by every guardrail that lists models. */
  allowedModels: { ids: ReadonlySet<string>; by: string[] } | null;
  ignoredModels: ReadonlyMap<string, string>;
  allowedProviders: { names: ReadonlySet<string>; by: string[] } | null;
  ignoredProviders: ReadonlyMap<string, string>;
  /** The guardrail that enforces zero data retention, or null. */
  zdrBy: string | null;
  dataCollectionDenyBy: string | null;
}

function intersect(current: { ids: ReadonlySet<string>; by: string[] } | null, list: string[] | null, id: string) {
  if (list === null) return current;
  const set = new Set(list);
  if (current === null) return { ids: set, by: [id] };
  return { ids: new Set([...current.ids].filter((x) => set.has(x))), by: [...current.by, id] };
}

export function accessPolicyOf(applied: readonly AppliedGuardrail[]): AccessPolicy {
  let allowedModels: AccessPolicy['allowedModels'] = null;
  let allowedProviders: { ids: ReadonlySet<string>; by: string[] } | null = null;
  const ignoredModels = new Map<string, string>();
  const ignoredProviders = new Map<string, string>();
  let zdrBy: string | null = null;
  let dataCollectionDenyBy: string | null = null;
  for (const { id, policy } of applied) {
    allowedModels = intersect(allowedModels, policy.allowed_models, id);
    allowedProviders = intersect(allowedProviders, policy.allowed_providers, id);
    for (const m of policy.ignored_models) if (!ignoredModels.has(m)) ignoredModels.set(m, id);
    for (const p of policy.ignored_providers) if (!ignoredProviders.has(p)) ignoredProviders.set(p, id);
    if (policy.enforce_zdr) zdrBy ??= id;
    if (policy.data_collection === 'deny') dataCollectionDenyBy ??= id;
  }
  return {
    allowedModels,
    ignoredModels,
    allowedProviders: allowedProviders && { names: allowedProviders.ids, by: allowedProviders.by },
    ignoredProviders,
    zdrBy,
    dataCollectionDenyBy,
  };
}

/** 403 `model_not_allowed` naming the guardrail when a guardrail keeps `model` (a catalog id) from this caller. */
export function modelRefusal(access: AccessPolicy, model: string): DomainError | null {
  const ignoredBy = access.ignoredModels.get(model);
  const by = ignoredBy ?? (access.allowedModels && !access.allowedModels.ids.has(model) ? access.allowedModels.by.join(', ') : null);
  if (by === null) return null;
  return new DomainError(
    'model_not_allowed',
    `The model ${model} is not allowed for this key by guardrail ${by}.`,
    { param: 'model', guardrail_id: by },
    'forbidden',
  );
}

/** The fields of a request's `provider` preferences (spec 4.2) a guardrail narrows. */
export interface NarrowablePreferences {
  only?: string[];
  ignore?: string[];
  zdr?: boolean;
  data_collection?: 'allow' | 'deny';
}

/** The request's provider preferences with the guardrails' rules added: `only` narrowed, `ignore` widened, `zdr` and `data_collection` enforced. */
export function narrowPreferences<P extends NarrowablePreferences>(access: AccessPolicy, preferences: P): P {
  const narrowed: P = { ...preferences };
  if (access.allowedProviders) {
    const names = access.allowedProviders.names;
    narrowed.only = preferences.only === undefined ? [...names] : preferences.only.filter((p) => names.has(p));
  }
  if (access.ignoredProviders.size > 0) narrowed.ignore = [...new Set([...(preferences.ignore ?? []), ...access.ignoredProviders.keys()])];
  if (access.zdrBy !== null) narrowed.zdr = true;
  if (access.dataCollectionDenyBy !== null) narrowed.data_collection = 'deny';
  return narrowed;
}

/** Which guardrails narrowed routing, for the refusal when nothing is left (`no_endpoint_allowed`). */
export function narrowingGuardrails(access: AccessPolicy): string[] {
  return [
    ...new Set([
      ...(access.allowedProviders?.by ?? []),
      ...access.ignoredProviders.values(),
      ...(access.zdrBy ? [access.zdrBy] : []),
      ...(access.dataCollectionDenyBy ? [access.dataCollectionDenyBy] : []),
    ]),
  ];
}

export function noEndpointAllowed(model: string, guardrails: string[]): DomainError {
  return new DomainError(
    'no_endpoint_allowed',
    `No endpoint of ${model} is allowed for this key by guardrail ${guardrails.join(', ')} (allowed and ignored providers, zero data retention, data collection).`,
    { param: 'model', guardrail_id: guardrails.join(',') },
    'forbidden',
  );
}
