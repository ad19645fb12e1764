import type { GuardrailRow } from '@svc/guardrails';
import type { KeyGuardrail, SubjectBudget } from '@svc/management';
import { nanoToUsd } from '@svc/platform';

const iso = (d: Date | string) => new Date(d).toISOString();
const usdOrNull = (nano: string | null) => (nano === null ? null : nanoToUsd(BigInt(nano)));

/** A guardrail as the API shows it (shaped like OpenRouter's): money in decimal USD, as a number like `limit` on keys. */
export function presentGuardrail(row: GuardrailRow) {
  const p = row.policy;
  return {
    id: row.guardrail_id,
    name: p.name,
    description: p.description,
    limit_usd: usdOrNull(p.limit_nano),
    reset_interval: p.reset_interval,
    include_byok_in_budgets: p.include_byok_in_budgets,
    allowed_models: p.allowed_models,
    ignored_models: p.ignored_models,
    allowed_providers: p.allowed_providers,
    ignored_providers: p.ignored_providers,
    enforce_zdr: p.enforce_zdr,
    data_collection: p.data_collection,
    content_filter_builtins: p.content_filter_builtins,
    content_filters: p.content_filters,
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
  };
}

export function presentBudget(b: SubjectBudget) {
  return {
    scope: b.scope,
    subject: b.subject,
    spent_usd: nanoToUsd(b.spentNano),
    held_usd: nanoToUsd(b.heldNano),
    remaining_usd: nanoToUsd(b.remainingNano),
    window_start: b.windowStart?.toISOString() ?? null,
    resets_at: b.resetsAt?.toISOString() ?? null,
  };
}

/** A guardrail over the calling key (GET /v1/key): its budget as this key meets it, null where it has none. */
export function presentKeyGuardrail(g: KeyGuardrail) {
  return {
    id: g.guardrailId,
    name: g.policy.name,
    scope: g.scope,
    limit_usd: usdOrNull(g.policy.limit_nano),
    reset_interval: g.policy.reset_interval,
    spent_usd: g.budget ? nanoToUsd(g.budget.spentNano) : null,
    remaining_usd: g.budget ? nanoToUsd(g.budget.remainingNano) : null,
    resets_at: g.budget?.resetsAt?.toISOString() ?? null,
  };
}
