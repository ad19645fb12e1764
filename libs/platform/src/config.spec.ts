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
