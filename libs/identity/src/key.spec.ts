import { deciderSpec } from '@svc/eventstore/testing/decider-spec';
import { DEFAULT_KEY_SETTINGS, keyDecider, MAX_ROTATION_GRACE_SECONDS, type KeyEvent, type KeySettings } from './key';
import { generateKeySecret, hashesEqual, hashKeySecret, isKeySecretShape, secretHint } from './secrets';

// The spec helper's clock reads 2026-11-02T10:00:00Z.
const spec = deciderSpec(keyDecider);
const settings: KeySettings = { ...DEFAULT_KEY_SETTINGS, name: 'dev', environment: 'test' };
const created: KeyEvent = {
  type: 'KeyCreated',
  data: {
    key_id: 'k1',
    account_id: 'a1',
    workspace_id: 'o1',
    org_id: 'o1',
    created_by: 'm1',
    ...settings,
    secret_hash: 'h1',
    secret_hint: 'svc_test_...wxyz',
  },
};
const revoked: KeyEvent = { type: 'KeyRevoked', data: { key_id: 'k1', account_id: 'a1' } };

describe('key decider', () => {
  it('creates a key once, recording only the hash of its secret', () => {
    const create = {
      type: 'CreateKey' as const,
      keyId: 'k1',
      accountId: 'a1',
      workspaceId: 'o1',
      orgId: 'o1',
      createdBy: 'm1',
      settings,
      secretHash: 'h1',
      secretHint: 'svc_test_...wxyz',
    };
    spec.given([]).when(create).then([created]);
    spec.given([created]).when(create).thenThrows('key_exists');
  });

  it('records only the fields an update really changes', () => {
    spec
      .given([created])
      .when({ type: 'UpdateKey', changes: { name: 'dev', rpm_limit: 10, allowed_models: ['sim/echo'] } })
      .then([{ type: 'KeyUpdated', data: { key_id: 'k1', account_id: 'a1', changes: { rpm_limit: 10, allowed_models: ['sim/echo'] } } }]);
    spec
      .given([created])
      .when({ type: 'UpdateKey', changes: { name: 'dev', limit_reset: 'monthly' } })
      .then([]);
    spec
      .given([created, revoked])
      .when({ type: 'UpdateKey', changes: { name: 'x' } })
      .thenThrows('key_revoked');
    spec
      .given([])
      .when({ type: 'UpdateKey', changes: { name: 'x' } })
      .thenThrows('key_not_found');
  });

  // Issue 14.1: a KeyCreated or KeyUpdated the identity read model cannot hold once stopped every
  // key write and revocation of every account; the decider refuses to decide one.
  it('refuses settings no reader of the event could hold', () => {
    const create = (over: Record<string, unknown>) => ({
      type: 'CreateKey' as const,
      keyId: 'k1',
      accountId: 'a1',
      workspaceId: 'o1',
      orgId: null,
      createdBy: 'a1',
      settings: { ...settings, ...over } as KeySettings,
      secretHash: 'h1',
      secretHint: 'svc_test_...wxyz',
    });
    for (const bad of [
      { name: null },
      { scope: null },
      { environment: null },
      { limit_reset: null },
      { limit_nano: '10000000000000000000' },
      { limit_nano: '-1' },
      { rpm_limit: 2 ** 31 },
      { tpm_limit: 1.5 },
      { allowed_models: ['x'.repeat(201)] },
      { name: 'a\u0000b' },
      { expires_at: 'tomorrow' },
    ]) {
      spec.given([]).when(create(bad)).thenThrows('invalid_key_settings');
      spec
        .given([created])
        .when({ type: 'UpdateKey', changes: bad as Partial<KeySettings> })
        .thenThrows('invalid_key_settings');
    }
    const { name: _name, ...withoutName } = settings;
    spec
      .given([])
      .when({ ...create({}), settings: withoutName as KeySettings })
      .thenThrows('invalid_key_settings');
    spec
      .given([])
      .when(create({ limit_nano: '1000000000000000000', rpm_limit: 2 ** 31 - 1 }))
      .then([
        {
          ...created,
          data: { ...created.data, org_id: null, workspace_id: 'o1', created_by: 'a1', limit_nano: '1000000000000000000', rpm_limit: 2 ** 31 - 1 },
        },
      ]);
  });

  it('rotates the secret, keeping the previous one for the grace period', () => {
    spec
      .given([created])
      .when({ type: 'RotateKey', secretHash: 'h2', secretHint: 'svc_test_...abcd', graceSeconds: 3600 })
      .then([
        {
          type: 'KeyRotated',
          data: {
            key_id: 'k1',
            account_id: 'a1',
            secret_hash: 'h2',
            secret_hint: 'svc_test_...abcd',
            previous_secret_hash: 'h1',
            previous_valid_until: '2026-11-02T11:00:00.000Z',
          },
        },
      ]);
  });

  it('rotates again from the latest secret; no grace stops the old secret at once', () => {
    const rotated: KeyEvent = {
      type: 'KeyRotated',
      data: { key_id: 'k1', account_id: 'a1', secret_hash: 'h2', secret_hint: 'x', previous_secret_hash: 'h1', previous_valid_until: null },
    };
    spec
      .given([created, rotated])
      .when({ type: 'RotateKey', secretHash: 'h3', secretHint: 'y', graceSeconds: 0 })
      .then([
        {
          type: 'KeyRotated',
          data: { key_id: 'k1', account_id: 'a1', secret_hash: 'h3', secret_hint: 'y', previous_secret_hash: 'h2', previous_valid_until: null },
        },
      ]);
  });

  it.each([-1, 1.5, MAX_ROTATION_GRACE_SECONDS + 1])('refuses a grace period of %p seconds', (graceSeconds) => {
    spec.given([created]).when({ type: 'RotateKey', secretHash: 'h2', secretHint: 'x', graceSeconds }).thenThrows('invalid_grace_period');
  });

  it('does not rotate a revoked key', () => {
    spec.given([created, revoked]).when({ type: 'RotateKey', secretHash: 'h2', secretHint: 'x', graceSeconds: 0 }).thenThrows('key_revoked');
  });

  it('revokes an existing key; revoking again changes nothing', () => {
    spec.given([created]).when({ type: 'RevokeKey' }).then([revoked]);
    spec.given([created, revoked]).when({ type: 'RevokeKey' }).then([]);
    spec.given([]).when({ type: 'RevokeKey' }).thenThrows('key_not_found');
  });
});

describe('key secrets (spec 2.3, 5.2)', () => {
  it('start with svc_live_ or svc_test_ and are unique', () => {
    const a = generateKeySecret('test');
    const b = generateKeySecret('live');
    expect(a).toMatch(/^svc_test_[0-9A-Za-z]{40}$/);
    expect(b).toMatch(/^svc_live_[0-9A-Za-z]{40}$/);
    expect(isKeySecretShape(a)).toBe(true);
    expect(isKeySecretShape(`${a}x`)).toBe(false);
    expect(new Set(Array.from({ length: 200 }, () => generateKeySecret('test'))).size).toBe(200);
  });

  it('are stored as a SHA-256 hash compared in constant time, and hinted without the secret', () => {
    const secret = generateKeySecret('test');
    const hash = hashKeySecret(secret);
    expect(hash).toMatch(/^[0-9a-f]{64}$/);
    expect(hash).not.toContain(secret.slice(9));
    expect(hashesEqual(hash, hashKeySecret(secret))).toBe(true);
    expect(hashesEqual(hash, hashKeySecret(`${secret.slice(0, -1)}${secret.endsWith('0') ? '1' : '0'}`))).toBe(false);
    expect(hashesEqual(hash, 'ab')).toBe(false);
    expect(secretHint(secret)).toBe(`svc_test_...${secret.slice(-4)}`);
  });
});

describe('key decider: expiry notices (spec 6.1 key.expiring)', () => {
  const NOW = new Date('2026-11-02T10:00:00Z');
  const expiringIn = (ms: number): KeyEvent =>
    ({ ...created, data: { ...(created.data as object), expires_at: new Date(NOW.getTime() + ms).toISOString() } }) as KeyEvent;
  const DAY = 24 * 3600_000;
  const note = { type: 'NoteKeyExpiring' as const };
  const expiring = (ms: number, days: number): KeyEvent => ({
    type: 'KeyExpiring',
    data: { key_id: 'k1', account_id: 'a1', expires_at: new Date(NOW.getTime() + ms).toISOString(), days_before: days },
  });

  it('notes nothing more than 7 days before, nor for a key that never expires', () => {
    spec
      .given([expiringIn(7 * DAY + 60_000)])
      .when(note)
      .then([]);
    spec.given([created]).when(note).then([]);
  });

  it('notes 7 days before, once; then 1 day before, once', () => {
    spec
      .given([expiringIn(6 * DAY)])
      .when(note)
      .then([expiring(6 * DAY, 7)]);
    spec
      .given([expiringIn(6 * DAY), expiring(6 * DAY, 7)])
      .when(note)
      .then([]);
    spec
      .given([expiringIn(DAY - 1), expiring(DAY - 1, 7)])
      .when(note)
      .then([expiring(DAY - 1, 1)]);
    spec
      .given([expiringIn(DAY - 1), expiring(DAY - 1, 7), expiring(DAY - 1, 1)])
      .when(note)
      .then([]);
  });

  it('a key made to expire within a day gets the 1-day notice only; an expired or revoked key none', () => {
    spec
      .given([expiringIn(12 * 3600_000)])
      .when(note)
      .then([expiring(12 * 3600_000, 1)]);
    spec
      .given([expiringIn(-1)])
      .when(note)
      .then([]);
    spec
      .given([expiringIn(DAY), revoked])
      .when(note)
      .then([]);
  });

  it('a new expiry date gets its own notices', () => {
    const moved: KeyEvent = {
      type: 'KeyUpdated',
      data: { key_id: 'k1', account_id: 'a1', changes: { expires_at: new Date(NOW.getTime() + 3 * DAY).toISOString() } },
    };
    spec
      .given([expiringIn(6 * DAY), expiring(6 * DAY, 7), moved])
      .when(note)
      .then([expiring(3 * DAY, 7)]);
  });
});
