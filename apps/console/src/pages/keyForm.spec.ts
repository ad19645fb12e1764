import { keyRecord } from '../testing/records';
import { amountOf, createAction, createKeyBody, daysUntil, emptyKeyForm, keyFormOf, keyStatus, listOf, updateAction, updateKeyBody } from './keyForm';

const NOW = new Date('2026-03-10T12:00:00Z');

describe('listOf', () => {
  it('splits on commas and line breaks, trimming and dropping empty entries', () => {
    expect(listOf(' 10.0.0.0/8, 192.168.1.1\n\n::1 ,')).toEqual(['10.0.0.0/8', '192.168.1.1', '::1']);
  });
  it('is null for an empty or blank text, so a PATCH clears the list', () => {
    expect(listOf('')).toBeNull();
    expect(listOf(' ,\n ')).toBeNull();
  });
});

describe('amountOf', () => {
  it('reads USD as typed, with or without a dollar sign', () => {
    expect(amountOf('1')).toBe(1);
    expect(amountOf(' $12.50 ')).toBe(12.5);
    expect(amountOf('.5')).toBe(0.5);
  });
  it('is null when empty and NaN for anything else', () => {
    expect(amountOf('  ')).toBeNull();
    expect(amountOf('ten')).toBeNaN();
    expect(amountOf('-1')).toBeNaN();
    expect(amountOf('1,5')).toBeNaN();
  });
});

describe('createKeyBody', () => {
  it('leaves out empty fields so the API applies its defaults', () => {
    expect(createKeyBody({ ...emptyKeyForm(), name: '  ' })).toEqual({ body: { environment: 'live', scope: 'full', limit_reset: 'monthly' } });
  });

  it('sends every field of spec 4.19 as the API takes it', () => {
    const { body } = createKeyBody({
      name: ' ci ',
      project: 'billing',
      environment: 'test',
      scope: 'read_only',
      limit: '$1',
      limit_reset: 'daily',
      allowed_models: 'sim/echo, sim/fast',
      allowed_ips: '10.0.0.0/8\n::1',
      allowed_referrers: '*.example.com',
      rpm_limit: '60',
      tpm_limit: '1_000',
      expires_in_days: '30',
    });
    expect(body).toEqual({
      name: 'ci',
      project: 'billing',
      environment: 'test',
      scope: 'read_only',
      limit: 1,
      limit_reset: 'daily',
      allowed_models: ['sim/echo', 'sim/fast'],
      allowed_ips: ['10.0.0.0/8', '::1'],
      allowed_referrers: ['*.example.com'],
      rpm_limit: 60,
      tpm_limit: 1000,
      expires_in_days: 30,
    });
  });

  it('keeps a limit of 0 (a key that may spend nothing)', () => {
    expect(createKeyBody({ ...emptyKeyForm(), limit: '0' }).body?.limit).toBe(0);
  });

  it('names the field whose value is not a number, and sends nothing', () => {
    expect(createKeyBody({ ...emptyKeyForm(), limit: 'lots' })).toEqual({ problem: { param: 'limit', message: expect.stringContaining('USD') } });
    expect(createKeyBody({ ...emptyKeyForm(), tpm_limit: '1e5' }).problem?.param).toBe('tpm_limit');
    expect(createKeyBody({ ...emptyKeyForm(), expires_in_days: 'soon' }).problem?.param).toBe('expires_in_days');
  });

  it("passes a number the API will refuse (its range is the API's to say)", () => {
    expect(createKeyBody({ ...emptyKeyForm(), rpm_limit: '1.5' }).body?.rpm_limit).toBe(1.5);
  });
});

describe('keyFormOf', () => {
  it('shows lists one entry a line and the days left until expiry, rounded up', () => {
    const values = keyFormOf(keyRecord({ allowed_ips: ['10.0.0.1', '::1'], limit: 2.5, expires_at: '2026-03-12T00:00:00Z', project: 'p' }), NOW);
    expect(values).toMatchObject({ allowed_ips: '10.0.0.1\n::1', limit: '2.5', expires_in_days: '2', project: 'p', allowed_models: '' });
  });
});

describe('updateKeyBody', () => {
  it('sends nothing when nothing changed, even with a management scope and an expiry', () => {
    const initial = keyFormOf(keyRecord({ scope: 'management', expires_at: '2026-04-01T00:00:00Z', allowed_ips: ['::1'] }), NOW);
    expect(updateKeyBody(initial, { ...initial, allowed_ips: ' ::1, ' })).toEqual({ body: {} });
  });

  it('sends only the changed fields, an emptied one as null to clear it', () => {
    const initial = keyFormOf(keyRecord({ limit: 1, allowed_models: ['sim/echo'], rpm_limit: 10 }), NOW);
    const { body } = updateKeyBody(initial, { ...initial, limit: '5', allowed_models: '', rpm_limit: '' });
    expect(body).toEqual({ limit: 5, allowed_models: null, rpm_limit: null });
  });

  it('clears the expiry with null when the days are emptied', () => {
    const initial = keyFormOf(keyRecord({ expires_at: '2026-03-20T00:00:00Z' }), NOW);
    expect(updateKeyBody(initial, { ...initial, expires_in_days: '' }).body).toEqual({ expires_in_days: null });
  });

  it('reports a field that is not a number', () => {
    const initial = keyFormOf(keyRecord(), NOW);
    expect(updateKeyBody(initial, { ...initial, rpm_limit: 'fast' }).problem?.param).toBe('rpm_limit');
  });
});

describe('keyStatus', () => {
  it('is revoked before expired, expired once the time has come', () => {
    expect(keyStatus({ revoked: true, expires_at: '2020-01-01T00:00:00Z' }, NOW)).toBe('revoked');
    expect(keyStatus({ revoked: false, expires_at: '2026-03-10T12:00:00Z' }, NOW)).toBe('expired');
    expect(keyStatus({ revoked: false, expires_at: '2026-03-10T12:00:01Z' }, NOW)).toBe('active');
    expect(keyStatus({ revoked: false, expires_at: null }, NOW)).toBe('active');
  });
});

describe('daysUntil', () => {
  it('never goes below 0', () => {
    expect(daysUntil('2026-03-01T00:00:00Z', NOW)).toBe(0);
    expect(daysUntil('2026-03-10T12:00:01Z', NOW)).toBe(1);
  });
});

describe('step-up actions (as keys.controller.ts demands them)', () => {
  it('asks grant_management for a management key, create_key otherwise', () => {
    expect(createAction({ scope: 'management' })).toBe('grant_management');
    expect(createAction({ scope: 'read_only' })).toBe('create_key');
    expect(createAction({})).toBe('create_key');
  });
  it('asks a code on update only when the body sends the management scope', () => {
    expect(updateAction({ scope: 'management' })).toBe('grant_management');
    expect(updateAction({ limit: 5 })).toBeNull();
  });
});
