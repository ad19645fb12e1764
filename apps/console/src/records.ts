/**
 * The records the /v1 API answers, as the console reads them: field names as the API gives them.
 * Types only. The server's own types are not imported: the console is built apart from the
 * server and must not pull its code into the browser.
 */

export type Environment = 'live' | 'test';
export type Scope = 'full' | 'read_only' | 'management';
export type LimitReset = 'daily' | 'weekly' | 'monthly' | 'never';

/** The key record of GET /v1/keys and GET /v1/key (docs/api/keys.md; `presentKey` in libs/management). */
export interface KeyRecord {
  id: string;
  name: string | null;
  project: string | null;
  environment: Environment;
  scope: Scope;
  hint: string;
  organization_id: string | null;
  created_by: string | null;
  created_at: string;
  updated_at: string;
  expires_at: string | null;
  revoked: boolean;
  revoked_at: string | null;
  limit: number | null;
  limit_reset: LimitReset;
  limit_remaining: number | null;
  limit_resets_at: string | null;
  usage: number;
  usage_daily: number;
  usage_weekly: number;
  usage_monthly: number;
  allowed_models: string[] | null;
  allowed_ips: string[] | null;
  allowed_referrers: string[] | null;
  rpm_limit: number | null;
  tpm_limit: number | null;
  rate_limit: { requests_per_minute: number; tokens_per_minute: number; concurrent_requests: number };
}

/** GET /v1/credits, USD. */
export interface Credits {
  total_credits: number;
  total_usage: number;
  balance: number;
  held: number;
  open_holds: number;
  available: number;
}

/** One entry of GET /v1/activity (docs/api/account.md "Generations and activity"): `usage` is USD. */
export interface ActivityRow {
  date: string;
  model: string;
  endpoint: string;
  key_id?: string;
  requests: number;
  requests_not_billed: number;
  prompt_tokens: number;
  completion_tokens: number;
  cached_tokens: number;
  reasoning_tokens: number;
  usage: number;
  /** The meters other than tokens, only where a call of the day used them. */
  characters?: number;
  search_units?: number;
  queries?: number;
  seconds?: number;
  images?: number;
  /** Nano-USD, as the provider reported it. */
  provider_cost?: number;
  audio_input?: number;
  cached_audio_input?: number;
  audio_output?: number;
}

/** A generation as GET /v1/generation answers it (docs/api/account.md "Generations and activity"). */
export interface Generation {
  id: string;
  model: string;
  provider: string | null;
  endpoint: string;
  status: string;
  key_id: string;
  client_request_id: string | null;
  preset: { slug: string; version: number } | null;
  created_at: string;
  finished_at: string | null;
  tokens_prompt: number;
  tokens_completion: number;
  tokens_cached: number;
  tokens_reasoning: number;
  total_cost: number;
  usage_by_meter: Record<string, number>;
  latency_ms: number | null;
  time_to_first_token_ms: number | null;
  error_code: string | null;
  cache_source_id: string | null;
}

/** A preset as GET /v1/presets lists it (apps/gateway/src/presets/presets.controller.ts). */
export interface Preset {
  slug: string;
  name: string | null;
  description: string | null;
  version: number;
  config: Record<string, unknown>;
  created_at: string;
  updated_at: string;
}

export interface PresetVersion {
  version: number;
  config: Record<string, unknown>;
  /** The version this one restored, when it was made by a rollback. */
  rolled_back_to: number | null;
  created_at: string;
  created_by: string | null;
}

/** GET /v1/presets/{slug}: the preset and every version, oldest first. */
export interface PresetDetail extends Preset {
  versions: PresetVersion[];
}

export interface PromptLoggingSetting {
  enabled: boolean;
  retention_days: number;
}

export interface StepUpSetting {
  enabled: boolean;
  email: string | null;
}

/** `<endpoint>` of GET /v1/settings (`presentWebhook` in libs/management). */
export interface WebhookEndpoint {
  id: string;
  url: string;
  /** null: every type. */
  events: string[] | null;
  paused: boolean;
  consecutive_failures: number;
  updated_at: string;
}

/** GET and PATCH /v1/settings (`presentSettings` in libs/management). */
export interface Settings {
  prompt_logging: PromptLoggingSetting;
  step_up: StepUpSetting;
  webhook: WebhookEndpoint | null;
}

export type DeliveryState = 'pending' | 'delivered' | 'failed' | 'cancelled';

/** `<event>` of GET /v1/webhook-events (`presentWebhookEvent`): the envelope and its delivery. */
export interface WebhookEvent {
  id: string;
  type: string;
  /** Unix seconds, as the envelope sent to the receiver has it. */
  created: number;
  data: Record<string, unknown>;
  delivery: { state: DeliveryState; attempts: number; next_attempt_at: string | null; last_status_code: number | null; last_error: string | null };
}

export interface WebhookAttempt {
  attempt: number;
  at: string;
  status_code: number | null;
  latency_ms: number;
  error: string | null;
  delivered: boolean;
}

export interface WebhookEventDetail extends WebhookEvent {
  attempts: WebhookAttempt[];
}

/** A row of GET /v1/prompt-logs (`summary` in apps/gateway/src/settings/prompt-logs.controller.ts). */
export interface PromptLogSummary {
  generation_id: string;
  key_id: string;
  endpoint: string;
  created_at: string;
  expires_at: string;
}

/** GET /v1/prompt-logs/{generation_id}: the summary with the exchange as kept. */
export interface PromptLog extends PromptLogSummary {
  request: unknown;
  /** The JSON body answered, or the event-stream text as the client got it. */
  response: unknown;
}

/** GET /v1/provider-keys (apps/gateway/src/account/provider-keys.controller.ts). */
export interface SavedProviderKey {
  provider: string;
  hint: string;
  saved_at: string;
}

export interface ProviderKeyList {
  data: SavedProviderKey[];
  providers: string[];
}

export type OrgRole = 'owner' | 'admin' | 'member';

/** GET /v1/organizations (apps/gateway/src/account/organizations.controller.ts). */
export interface Organization {
  id: string;
  name: string;
  owner_account_id: string;
  role: OrgRole;
  created_at: string;
}

/** GET /v1/organizations/{id}/members: the owner first. */
export interface OrgMember {
  account_id: string;
  role: OrgRole;
  added_at: string;
}

/** An entry of GET /v1/audit-log (libs/projections audit-log read model). */
export interface AuditEntry {
  id: string;
  at: string;
  account_id: string;
  actor: string;
  actor_account_id: string | null;
  ip: string | null;
  action: string;
  target_id: string;
  details: Record<string, unknown>;
}

export type ContentAction = 'flag' | 'redact' | 'block';

export interface GuardrailBuiltin {
  slug: string;
  action: ContentAction;
  label?: string;
}

export interface GuardrailPattern {
  pattern: string;
  action: ContentAction;
  label?: string;
}

/** A guardrail as GET /v1/guardrails lists it (docs/api/guardrails.md; `presentGuardrail` in apps/gateway). */
export interface Guardrail {
  id: string;
  name: string;
  description: string | null;
  /** Decimal USD; null: no budget. */
  limit_usd: number | null;
  reset_interval: LimitReset;
  include_byok_in_budgets: boolean;
  /** null: every model (provider) is allowed. */
  allowed_models: string[] | null;
  ignored_models: string[];
  allowed_providers: string[] | null;
  ignored_providers: string[];
  enforce_zdr: boolean;
  data_collection: 'allow' | 'deny';
  content_filter_builtins: GuardrailBuiltin[];
  content_filters: GuardrailPattern[];
  created_at: string;
  updated_at: string;
}

export type BudgetScope = 'organization' | 'member' | 'key';

/** One assigned subject's budget in the current window (GET /v1/guardrails/{id}), USD. */
export interface GuardrailBudget {
  scope: BudgetScope;
  subject: string;
  spent_usd: number;
  held_usd: number;
  remaining_usd: number;
  window_start: string | null;
  resets_at: string | null;
}

export interface GuardrailDetail extends Guardrail {
  budgets: GuardrailBudget[];
}

/** A guardrail over the calling key, as GET /v1/key lists them (widest first). */
export interface KeyGuardrail {
  id: string;
  name: string;
  scope: BudgetScope;
}
