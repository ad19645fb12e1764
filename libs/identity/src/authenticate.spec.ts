import { ApiError } from '../../platform/src/errors';
import { authenticate, keyFromHeaders, type KeyRecord } from './authenticate';
import { generateKeySecret, hashKeySecret } from './secrets';

describe('authentication (spec 5)', () => {
  const secret = generateKeySecret('test');
  const record: KeyRecord = { keyId: 'k1', accountId: 'a1', scope: 'full', environment: 'test', secretHash: hashKeySecret(secret), revoked: false };
  const lookup = async (hash: string) => (hash === record.secretHash ? record : null);

  it('reads the key from Bearer or x-api-key', () => {
    expect(keyFromHeaders({ authorization: `Bearer ${secret}` })).toBe(secret);
    expect(keyFromHeaders({ authorization: `bearer   ${secret}` })).toBe(secret);
    expect(keyFromHeaders({ 'x-api-key': secret })).toBe(secret);
    expect(keyFromHeaders({ authorization: 'Basic abc' })).toBeNull();
    expect(keyFromHeaders({})).toBeNull();
  });

  it('accepts a known key and names its account', async () => {
    await expect(authenticate(secret, lookup)).resolves.toEqual({ keyId: 'k1', accountId: 'a1', scope: 'full', environment: 'test' });
  });

  it.each([
    ['missing', null, lookup, 'missing_api_key'],
    ['malformed', 'sk-123', lookup, 'invalid_api_key'],
    ['unknown', generateKeySecret('test'), lookup, 'invalid_api_key'],
    ['revoked', secret, async () => ({ ...record, revoked: true }), 'invalid_api_key'],
  ])('refuses a %s key with 401 authentication_error', async (_what, key, find, code) => {
    const err = await authenticate(key as string | null, find as typeof lookup).catch((e) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect(err.status).toBe(401);
    expect(err.toBody().error).toMatchObject({ type: 'authentication_error', code });
  });
});
