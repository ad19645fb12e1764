import { ApiError, refusalOf } from '@svc/platform';
import { assertModelAllowed, authenticate, authorize, keyFromHeaders, type Caller, type SecretMatch } from './authenticate';
import { DEFAULT_KEY_SETTINGS } from './key';
import { generateKeySecret, hashKeySecret } from './secrets';

const NOW = new Date('2026-11-02T10:00:00Z');
const secret = generateKeySecret('test');
const record: SecretMatch = {
  keyId: 'k1',
  accountId: 'a1',
  workspaceId: 'a1',
  orgId: null,
  createdBy: 'a1',
  ...DEFAULT_KEY_SETTINGS,
  environment: 'test',
  secretHint: 'svc_test_...',
  createdAt: '2026-11-01T00:00:00.000Z',
  updatedAt: '2026-11-01T00:00:00.000Z',
  revokedAt: null,
  secretHash: hashKeySecret(secret),
  secretValidUntil: null,
  orgActive: true,
  sealedProviderKeys: new Map(),
  promptLogDays: null,
  presets: new Map(),
  guardrails: [],
};
const finding =
  (over: Partial<SecretMatch> = {}) =>
  async (hash: string) =>
    hash === record.secretHash ? { ...record, ...over } : null;

const failure = async (promise: Promise<unknown>) => {
  const err = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ApiError);
  return (err as ApiError).toBody().error;
};

describe('authentication (spec 5)', () => {
  it('reads the key from Bearer or x-api-key', () => {
    expect(keyFromHeaders(['Authorization', `Bearer ${secret}`])).toBe(secret);
    expect(keyFromHeaders(['authorization', `bearer   ${secret}`])).toBe(secret);
    expect(keyFromHeaders(['X-Api-Key', secret])).toBe(secret);
    expect(keyFromHeaders(['authorization', 'Basic abc'])).toBeNull();
    expect(keyFromHeaders(['authorization', 'Basic abc', 'x-api-key', secret])).toBe(secret);
    expect(keyFromHeaders(['authorization', `Bearer ${secret}`, 'x-api-key', secret])).toBe(secret);
    expect(keyFromHeaders([])).toBeNull();
  });

  it('refuses a request that carries two keys rather than guess which one to bill (issue 14.12)', () => {
    const other = `svc_live_${'b'.repeat(40)}`;
    const refusal = (raw: string[]) => {
      try {
        keyFromHeaders(raw);
      } catch (err) {
        return refusalOf(err)!.toBody().error;
      }
      return null;
    };
    expect(refusal(['authorization', `Bearer ${secret}`, 'x-api-key', other])).toMatchObject({
      type: 'invalid_request_error',
      code: 'ambiguous_api_key',
      param: 'x-api-key',
    });
    expect(refusal(['authorization', `Bearer ${secret}`, 'Authorization', `Bearer ${secret}`])).toMatchObject({
      code: 'ambiguous_api_key',
      param: 'Authorization',
    });
    expect(refusal(['x-api-key', secret, 'x-api-key', other])).toMatchObject({ code: 'ambiguous_api_key', param: 'x-api-key' });
  });

  it('accepts a known key and returns its record without secret details', async () => {
    const caller = await authenticate(secret, finding(), NOW);
    expect(caller.keyId).toBe('k1');
    expect(caller).not.toHaveProperty('secretHash');
    expect(caller).not.toHaveProperty('secretValidUntil');
  });

  it.each([
    ['missing', null, finding(), 'missing_api_key'],
    ['malformed', 'sk-123', finding(), 'invalid_api_key'],
    ['unknown', generateKeySecret('test'), finding(), 'invalid_api_key'],
    ['revoked', secret, finding({ revokedAt: '2026-11-01T12:00:00.000Z' }), 'invalid_api_key'],
    ['expired', secret, finding({ expires_at: NOW.toISOString() }), 'key_expired'],
    ['rotated out', secret, finding({ secretValidUntil: NOW.toISOString() }), 'invalid_api_key'],
    ['of a deleted organization', secret, finding({ orgActive: false }), 'invalid_api_key'],
  ])('refuses a %s key with 401 authentication_error', async (_what, key, lookup, code) => {
    const error = await failure(authenticate(key as string | null, lookup, NOW));
    expect(error).toMatchObject({ type: 'authentication_error', code });
  });

  it('accepts a rotated-out secret until its grace period ends and a key until it expires', async () => {
    const later = new Date(NOW.getTime() + 1000).toISOString();
    await expect(authenticate(secret, finding({ secretValidUntil: later, expires_at: later }), NOW)).resolves.toMatchObject({ keyId: 'k1' });
  });
});

describe('authorization (spec 5.3-5.6)', () => {
  const caller = (over: Partial<Caller> = {}): Caller => ({ ...record, ...over });
  const from = { ip: '203.0.113.5' };
  const denied = (fn: () => void) => {
    try {
      fn();
    } catch (err) {
      return refusalOf(err)!.toBody().error;
    }
    return null;
  };

  it.each([
    ['full', 'model_call', null],
    ['full', 'lookup', null],
    ['full', 'management', 'management_key_required'],
    ['read_only', 'model_call', 'read_only_key'],
    ['read_only', 'lookup', null],
    ['read_only', 'management', 'management_key_required'],
    ['management', 'model_call', 'management_key_used_for_model_call'],
    ['management', 'lookup', null],
    ['management', 'management', null],
  ] as const)('a %s key on a %s operation -> %p', (scope, operation, code) => {
    const error = denied(() => authorize(caller({ scope }), operation, from));
    expect(error === null ? null : error.code).toBe(code);
    if (error) expect(error.type).toBe('permission_error');
  });

  it('checks IP and referrer restrictions before the scope', () => {
    expect(denied(() => authorize(caller({ scope: 'read_only', allowed_ips: ['10.0.0.0/8'] }), 'model_call', from))?.code).toBe('ip_not_allowed');
    expect(denied(() => authorize(caller({ allowed_ips: ['203.0.113.0/24'] }), 'model_call', from))).toBeNull();
    expect(denied(() => authorize(caller({ allowed_referrers: ['app.example.com'] }), 'lookup', from))?.code).toBe('referrer_not_allowed');
    expect(denied(() => authorize(caller({ allowed_referrers: ['app.example.com'] }), 'lookup', { ...from, origin: 'https://app.example.com' }))).toBeNull();
  });

  it('answers a model outside the allowlist like an unknown model (404)', () => {
    const error = denied(() => assertModelAllowed(caller({ allowed_models: ['sim/small-8k'] }), 'sim/echo'));
    expect(error).toMatchObject({ type: 'not_found_error', code: 'model_not_found', param: 'model' });
    expect(denied(() => assertModelAllowed(caller({ allowed_models: ['sim/echo'] }), 'sim/echo'))).toBeNull();
  });
});
