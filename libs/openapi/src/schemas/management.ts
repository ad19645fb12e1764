/** Presets (spec 2.5), settings, webhooks, prompt logs, organizations and provider keys: what a management key changes. */
import { anyObject, arr, bool, dateTime, int, nullable, obj, oneOfValues, ref, str, unixSeconds, usd } from '../json-schema';

/** Spec 2.5. */
export const PresetConfig = obj(
  {
    model: str(),
    models: arr(str(), { maxItems: 2 }),
    system_prompt: str(),
    params: anyObject(),
    provider: anyObject('routing preferences'),
    reasoning: anyObject(),
    plugins: arr(anyObject()),
    tools: arr(anyObject()),
    cache: obj({ enabled: bool(), ttl_seconds: int(undefined, { minimum: 1, maximum: 86400 }) }, { required: [] }),
  },
  { required: [] },
);
export const PresetRequest = obj(
  { slug: str(undefined, { pattern: '^[a-z0-9][a-z0-9-]{0,63}$' }), name: nullable(str()), description: nullable(str()), config: ref('PresetConfig') },
  { required: ['slug'] },
);
const presetProperties = {
  slug: str(),
  name: nullable(str()),
  description: nullable(str()),
  version: int(),
  config: ref('PresetConfig'),
  created_at: dateTime(),
  updated_at: dateTime(),
};
export const Preset = obj(presetProperties);
export const PresetWithVersions = obj({
  ...presetProperties,
  versions: arr(obj({ version: int(), config: ref('PresetConfig'), rolled_back_to: nullable(int()), created_at: dateTime(), created_by: str() })),
});

export const WebhookEndpoint = obj({
  id: str(),
  url: str(),
  events: nullable(arr(str())),
  paused: bool(),
  consecutive_failures: int(),
  updated_at: dateTime(),
});
export const Settings = obj({
  prompt_logging: obj({ enabled: bool(), retention_days: int(undefined, { minimum: 1, maximum: 30 }) }),
  step_up: obj({ enabled: bool(), email: nullable(str()) }),
  webhook: nullable(ref('WebhookEndpoint')),
});
const webhookEventProperties = {
  id: str(),
  type: str(),
  created: unixSeconds(),
  data: anyObject(),
  delivery: obj({
    state: oneOfValues(['pending', 'delivered', 'failed', 'cancelled']),
    attempts: int(),
    next_attempt_at: nullable(dateTime()),
    last_status_code: nullable(int()),
    last_error: nullable(str()),
  }),
};
export const WebhookEvent = obj(webhookEventProperties);
export const WebhookEventWithAttempts = obj({
  ...webhookEventProperties,
  attempts: arr(obj({ attempt: int(), at: dateTime(), status_code: nullable(int()), latency_ms: nullable(int()), error: nullable(str()), delivered: bool() })),
});

export const PromptLogSummary = obj({ generation_id: str(), key_id: str(), endpoint: str(), created_at: dateTime(), expires_at: dateTime() });

export const Organization = obj({
  id: str(),
  name: nullable(str()),
  owner_account_id: str(),
  role: oneOfValues(['owner', 'admin', 'member']),
  created_at: dateTime(),
});
export const Member = obj({ account_id: str(), role: oneOfValues(['owner', 'admin', 'member']), added_at: dateTime() });
export const MemberChange = obj({ org_id: str(), account_id: str(), role: oneOfValues(['admin', 'member']) });
export const ProviderKey = obj({ provider: str(), hint: str('last four characters, never the key'), saved_at: dateTime() });

/** Issue 44: a guardrail, shaped like OpenRouter's; money in decimal USD (`limit_usd`), `null` for no budget or no allow-list. */
const contentAction = oneOfValues(['block', 'redact', 'flag']);
const guardrailFields = {
  name: str(undefined, { minLength: 1, maxLength: 200 }),
  description: nullable(str(undefined, { maxLength: 2000 })),
  limit_usd: nullable(usd('budget per `reset_interval`, held against before each request; null: no budget')),
  reset_interval: oneOfValues(['daily', 'weekly', 'monthly', 'never']),
  include_byok_in_budgets: bool('whether requests on your own provider keys count against the budget'),
  allowed_models: nullable(arr(str(), { maxItems: 500 })),
  ignored_models: arr(str(), { maxItems: 500 }),
  allowed_providers: nullable(arr(str(), { maxItems: 500 })),
  ignored_providers: arr(str(), { maxItems: 500 }),
  enforce_zdr: bool('only zero-data-retention endpoints'),
  data_collection: oneOfValues(['allow', 'deny']),
  content_filter_builtins: arr(
    obj(
      { slug: oneOfValues(['email', 'phone', 'card', 'api_key', 'prompt_injection']), action: contentAction, label: str() },
      { required: ['slug', 'action'] },
    ),
  ),
  content_filters: arr(obj({ pattern: str('RE2 syntax'), action: contentAction, label: str() }, { required: ['pattern', 'action'] })),
};
export const GuardrailRequest = obj(guardrailFields, {
  required: [],
  description: 'POST: `name` required, the rest default; PATCH: only what changes, `null` resets a field to its default.',
});
export const Guardrail = obj({ id: str(), ...guardrailFields, created_at: dateTime(), updated_at: dateTime() });
export const GuardrailWithBudgets = obj({
  id: str(),
  ...guardrailFields,
  created_at: dateTime(),
  updated_at: dateTime(),
  budgets: arr(
    obj({
      scope: oneOfValues(['organization', 'member', 'key']),
      subject: str('the workspace, member or key id'),
      spent_usd: usd(),
      held_usd: usd('open holds: requests still running'),
      remaining_usd: usd(),
      window_start: nullable(dateTime()),
      resets_at: nullable(dateTime()),
    }),
    { description: 'each assigned subject in the current window; empty without a budget' },
  ),
});
