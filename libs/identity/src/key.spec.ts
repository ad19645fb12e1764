import { deciderSpec } from '../../eventstore/src/testing/decider-spec';
import { keyDecider, type KeyEvent } from './key';
import { generateKeySecret, hashesEqual, hashKeySecret, isKeySecretShape, secretHint } from './secrets';

const spec = deciderSpec(keyDecider);
const created: KeyEvent = {
  type: 'KeyCreated',
  data: { key_id: 'k1', account_id: 'a1', name: 'dev', scope: 'full', environment: 'test', secret_hash: 'ab', secret_hint: 'svc_test_...wxyz' },
};

describe('key decider', () => {
  it('creates a key once, recording only the hash of its secret', () => {
    spec
      .given([])
      .when({ type: 'CreateKey', keyId: 'k1', accountId: 'a1', name: 'dev', scope: 'full', environment: 'test', secretHash: 'ab', secretHint: 'svc_test_...wxyz' })
      .then([created]);
    spec
      .given([created])
      .when({ type: 'CreateKey', keyId: 'k1', accountId: 'a1', name: 'dev', scope: 'full', environment: 'test', secretHash: 'cd', secretHint: 'x' })
      .thenThrows('key_exists');
  });

  it('revokes an existing key; revoking again changes nothing', () => {
    const revoked: KeyEvent = { type: 'KeyRevoked', data: { key_id: 'k1', account_id: 'a1' } };
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
    expect(hashesEqual(hash, hashKeySecret(`${secret.slice(0, -1)}0`))).toBe(false);
    expect(hashesEqual(hash, 'ab')).toBe(false);
    expect(secretHint(secret)).toBe(`svc_test_...${secret.slice(-4)}`);
  });
});
