/** Keys, generations, credits, activity, the audit log and notices: what an account reads about itself (spec 2.2, 2.3, 4.19, 4.20). */
import { anyObject, arr, bool, constant, dateTime, int, nullable, num, obj, oneOfValues, ref, str, unixSeconds, usd } from '../json-schema';

/** Spec 2.2. */
const keyLimits = {
  limit: nullable(usd('spend limit in USD per `limit_reset` period')),
  limit_reset: nullable(oneOfValues(['daily', 'weekly', 'monthly', 'never'])),
  limit_remaining: nullable(usd()),
  limit_resets_at: nullable(dateTime()),
  usage: nullable(usd('lifetime spend in USD')),
  usage_daily: nullable(usd()),
  usage_weekly: nullable(usd('since Monday 00:00 UTC')),
  usage_monthly: nullable(usd()),
};

/** Spec 2.3 plus the fields docs/api/keys.md lists. */
const keyRecordProperties = {
  id: str(),
  name: str(),
  project: nullable(str()),
  environment: oneOfValues(['live', 'test']),
  scope: oneOfValues(['full', 'read_only', 'management']),
  hint: str('prefix and last four characters of the secret'),
  organization_id: nullable(str()),
  created_by: str(),
  created_at: dateTime(),
  updated_at: dateTime(),
  expires_at: nullable(dateTime()),
  revoked: bool(),
  revoked_at: nullable(dateTime()),
  ...keyLimits,
  allowed_models: nullable(arr(str())),
  allowed_ips: nullable(arr(str())),
  allowed_referrers: nullable(arr(str())),
  rpm_limit: nullable(int()),
  tpm_limit: nullable(int()),
  rate_limit: obj({ requests_per_minute: int(), tokens_per_minute: int(), concurrent_requests: int() }),
};
export const KeyRecord = obj(keyRecordProperties, { description: 'Spec 2.3: a key record (KeyLimits, spec 2.2, plus its settings).' });

/** Issue 44: a guardrail over the calling key, with this key's budget window under it (null fields without a budget). */
export const KeyGuardrail = obj({
  id: str(),
  name: str(),
  scope: oneOfValues(['organization', 'member', 'key'], "what it is assigned to: the workspace, the key's member (its creator), the key"),
  limit_usd: nullable(usd()),
  reset_interval: oneOfValues(['daily', 'weekly', 'monthly', 'never']),
  spent_usd: nullable(usd('charged in the current window')),
  remaining_usd: nullable(usd('limit less spent and held, never below 0')),
  resets_at: nullable(dateTime()),
});
/** GET /v1/key: the key record and the guardrails that apply to it, widest first. */
export const CurrentKey = obj({ ...keyRecordProperties, guardrails: arr(ref('KeyGuardrail')) }, { description: 'Spec 4.20 and issue 44.' });

/** Spec 4.19 (`libs/management/src/key.request.ts`): every field optional; `null` clears a nullable one on PATCH. */
const keyRequestProperties = {
  name: str(undefined, { maxLength: 200 }),
  project: nullable(str(undefined, { maxLength: 200 })),
  environment: oneOfValues(['live', 'test']),
  scope: oneOfValues(['full', 'read_only', 'management']),
  limit: nullable(num('USD per `limit_reset` period', { minimum: 0, maximum: 1_000_000_000 })),
  limit_reset: oneOfValues(['daily', 'weekly', 'monthly', 'never'], 'default monthly; never is a lifetime budget'),
  allowed_models: nullable(arr(str(), { maxItems: 1000 })),
  allowed_ips: nullable(arr(str('IP address or CIDR range'), { maxItems: 1000 })),
  allowed_referrers: nullable(arr(str('example.com or *.example.com'), { maxItems: 1000 })),
  rpm_limit: nullable(int('can only lower the default', { minimum: 1, maximum: 2147483647 })),
  tpm_limit: nullable(int('can only lower the default', { minimum: 1, maximum: 2147483647 })),
  expires_in_days: nullable(int(undefined, { minimum: 1, maximum: 3650 })),
};
export const KeyRequest = obj(keyRequestProperties, { required: [], description: 'Spec 4.19: POST /keys body; all optional.' });
/** docs/api/operator.md: as POST /v1/keys, plus the organization the key belongs to. */
export const AdminKeyRequest = obj({ ...keyRequestProperties, org_id: str() }, { required: [] });

export const CreatedKey = obj({
  data: ref('KeyRecord'),
  key: str('the secret (`svc_live_...` or `svc_test_...`), returned only this once', { pattern: '^svc_(live|test)_' }),
});

/** docs/api/account.md "Generations and activity". */
const generationProperties = {
  id: str(),
  model: str(),
  provider: nullable(str()),
  endpoint: str(),
  status: oneOfValues(['in_progress', 'completed', 'not_billed', 'failed', 'expired', 'cached']),
  key_id: nullable(str()),
  client_request_id: nullable(str()),
  preset: nullable(obj({ slug: str(), version: int() })),
  created_at: dateTime(),
  finished_at: nullable(dateTime()),
  tokens_prompt: int(),
  tokens_completion: int(),
  tokens_cached: int(),
  tokens_reasoning: int(),
  total_cost: usd(),
  usage_by_meter: { type: 'object', additionalProperties: num(), description: 'what the charge billed, by meter' },
  cost_lines: nullable(
    arr(
      obj({
        meter: str('a meter of usage_by_meter (input counts only the input not served from cache), or rounding, batch_discount, byok_credit, byok_fee'),
        quantity: num('units of the meter; for rounding, nanos; for batch_discount and byok_fee, the percent'),
        unit_price: usd('USD per unit, exact (may be finer than a nano-dollar)'),
        amount: usd('USD, quantity x unit_price truncated to the nano-dollar; negative for a discount or credit'),
      }),
      {
        description:
          'issue 23: the charge line by line; the amounts add up to total_cost exactly. [] when nothing was charged; null for a charge recorded before lines were whose lines cannot be rebuilt',
      },
    ),
  ),
  byok: bool("answered with the account's own provider key: billed the BYOK fee"),
  batch: bool('a batch line, billed at the batch discount'),
  latency_ms: nullable(int()),
  time_to_first_token_ms: nullable(int()),
  error_code: nullable(str()),
  cache_source_id: nullable(str()),
  guardrail_findings: arr(
    obj({
      guardrail_id: str(),
      filter: str("a builtin's slug, or a custom filter as `content_filters[i]`"),
      action: oneOfValues(['flag', 'redact', 'block']),
      count: int(),
    }),
    { description: "issue 44: what the guardrails' content filters found in the prompt (counts, never the text); [] when nothing" },
  ),
};
export const Generation = obj(generationProperties);
/** POST /v1/generations/lookup: a generation found, flagged so. */
export const GenerationFound = obj({ found: constant(true), ...generationProperties });

export const Credits = obj(
  {
    total_credits: usd(),
    total_usage: usd(),
    total_adjustments: usd('issue 23: credit notes and operator adjustments, signed'),
    balance: usd('total_credits - total_usage + total_adjustments'),
    held: usd(),
    open_holds: int(),
    available: usd(),
  },
  { description: 'Spec 4.20: balance and lifetime totals.' },
);

export const Activity = obj(
  {
    date: str(undefined, { format: 'date' }),
    model: str(),
    endpoint: str(),
    key_id: str(),
    requests: int(),
    requests_not_billed: int(),
    prompt_tokens: int(),
    completion_tokens: int(),
    cached_tokens: int(),
    reasoning_tokens: int(),
    usage: usd(),
  },
  {
    required: [
      'date',
      'model',
      'endpoint',
      'requests',
      'requests_not_billed',
      'prompt_tokens',
      'completion_tokens',
      'cached_tokens',
      'reasoning_tokens',
      'usage',
    ],
    open: true,
  },
);

export const AuditEntry = obj({
  id: str(),
  at: dateTime(),
  account_id: str(),
  actor: str(),
  actor_account_id: nullable(str()),
  ip: nullable(str()),
  action: str(),
  target_id: nullable(str()),
  details: anyObject(),
});

export const Notice = obj({ id: str(), type: str(), title: str(), message: str(), data: anyObject(), created: unixSeconds() });
