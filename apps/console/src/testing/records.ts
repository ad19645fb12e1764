/** API records for the specs: a plausible record, with only what a test is about overridden. */
import type { ActivityRow, KeyRecord } from '../records';

export function keyRecord(overrides: Partial<KeyRecord> = {}): KeyRecord {
  return {
    id: 'key_1',
    name: 'ci',
    project: null,
    environment: 'live',
    scope: 'full',
    hint: 'svc_live_ab…wxyz',
    organization_id: null,
    created_by: 'acct_1',
    created_at: '2026-03-01T00:00:00Z',
    updated_at: '2026-03-01T00:00:00Z',
    expires_at: null,
    revoked: false,
    revoked_at: null,
    limit: null,
    limit_reset: 'monthly',
    limit_remaining: null,
    limit_resets_at: null,
    usage: 0,
    usage_daily: 0,
    usage_weekly: 0,
    usage_monthly: 0,
    allowed_models: null,
    allowed_ips: null,
    allowed_referrers: null,
    rpm_limit: null,
    tpm_limit: null,
    rate_limit: { requests_per_minute: 600, tokens_per_minute: 2_000_000, concurrent_requests: 64 },
    ...overrides,
  };
}

export function activityRow(overrides: Partial<ActivityRow> = {}): ActivityRow {
  return {
    date: '2026-03-15',
    model: 'sim/echo',
    endpoint: '/v1/chat/completions',
    requests: 1,
    requests_not_billed: 0,
    prompt_tokens: 10,
    completion_tokens: 5,
    cached_tokens: 0,
    reasoning_tokens: 0,
    usage: 0.0001,
    ...overrides,
  };
}
