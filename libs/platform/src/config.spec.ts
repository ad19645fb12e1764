import { ConfigError, loadConfig } from './config';

describe('SVC_AUTH_CACHE', () => {
  it('is on unless set to off', () => {
    expect(loadConfig({}).authCache).toBe(true);
    expect(loadConfig({ SVC_AUTH_CACHE: 'on' }).authCache).toBe(true);
    expect(loadConfig({ SVC_AUTH_CACHE: ' off ' }).authCache).toBe(false);
  });

  it('refuses anything else, naming the variable', () => {
    expect(() => loadConfig({ SVC_AUTH_CACHE: 'false' })).toThrow(ConfigError);
    expect(() => loadConfig({ SVC_AUTH_CACHE: 'false' })).toThrow(/^SVC_AUTH_CACHE: expected on or off, got "false"$/);
  });
});

describe('SVC_AUTH_FAILURE_LIMIT', () => {
  it('is 100 failed authentications per minute and client address unless set to a positive integer', () => {
    expect(loadConfig({}).authFailureLimit).toBe(100);
    expect(loadConfig({ SVC_AUTH_FAILURE_LIMIT: '5' }).authFailureLimit).toBe(5);
    for (const bad of ['0', '-1', 'many', '1.5']) expect(() => loadConfig({ SVC_AUTH_FAILURE_LIMIT: bad })).toThrow(/^SVC_AUTH_FAILURE_LIMIT: /);
  });
});

describe('SVC_REQUEST_LOG', () => {
  it('is on unless set to off', () => {
    expect(loadConfig({}).requestLog).toBe(true);
    expect(loadConfig({ SVC_REQUEST_LOG: 'off' }).requestLog).toBe(false);
    expect(() => loadConfig({ SVC_REQUEST_LOG: 'quiet' })).toThrow(/^SVC_REQUEST_LOG: /);
  });
});

describe('SVC_WEBHOOK_ALLOW_PRIVATE', () => {
  it('is off unless set to true or on', () => {
    expect(loadConfig({}).webhookAllowPrivate).toBe(false);
    expect(loadConfig({ SVC_WEBHOOK_ALLOW_PRIVATE: 'true' }).webhookAllowPrivate).toBe(true);
    expect(loadConfig({ SVC_WEBHOOK_ALLOW_PRIVATE: ' on ' }).webhookAllowPrivate).toBe(true);
    expect(loadConfig({ SVC_WEBHOOK_ALLOW_PRIVATE: 'false' }).webhookAllowPrivate).toBe(false);
    expect(loadConfig({ SVC_WEBHOOK_ALLOW_PRIVATE: 'off' }).webhookAllowPrivate).toBe(false);
  });

  it('refuses anything else, naming the variable', () => {
    for (const bad of ['yes', '1', 'TRUE']) {
      expect(() => loadConfig({ SVC_WEBHOOK_ALLOW_PRIVATE: bad })).toThrow(ConfigError);
      expect(() => loadConfig({ SVC_WEBHOOK_ALLOW_PRIVATE: bad })).toThrow(/^SVC_WEBHOOK_ALLOW_PRIVATE: expected true or false/);
    }
  });
});
