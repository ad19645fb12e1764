import { ApiFailure } from '../api';
import { atSecond } from '../format';
import { actorOf, auditQuery, AUDIT_ACTIONS, dayAfter, dayStart, detailsSummary, noFilters } from './auditLog';

describe('audit log filters', () => {
  it('starts a day at UTC midnight and ends the range at the start of the next day', () => {
    expect(dayStart('2026-03-03')).toBe('2026-03-03T00:00:00Z');
    expect(dayAfter('2026-03-03')).toBe('2026-03-04T00:00:00Z');
    expect(dayAfter('2024-02-28')).toBe('2024-02-29T00:00:00Z');
    expect(dayAfter('2025-02-28')).toBe('2025-03-01T00:00:00Z');
    expect(dayAfter('2025-12-31')).toBe('2026-01-01T00:00:00Z');
    // Date.UTC would have made this 2000-01-01.
    expect(dayAfter('0099-12-31')).toBe('0100-01-01T00:00:00Z');
  });

  it('passes a five-digit year on as typed, for the API to refuse', () => {
    expect(dayAfter('20000-01-01')).toBe('20000-01-02T00:00:00Z');
  });

  it('sends only the filters that are set, and the default limit not at all', () => {
    expect(auditQuery(noFilters())).toEqual({ query: {} });
    expect(auditQuery({ action: ' key.created ', from: '2026-03-01', to: '2026-03-03', limit: '50' })).toEqual({
      query: { action: 'key.created', since: '2026-03-01T00:00:00Z', until: '2026-03-04T00:00:00Z', limit: '50' },
    });
    expect(auditQuery({ ...noFilters(), to: '2026-03-01' })).toEqual({ query: { until: '2026-03-02T00:00:00Z' } });
  });

  it('accepts a one-day range and refuses one that ends before it starts, on until', () => {
    expect(auditQuery({ ...noFilters(), from: '2026-03-03', to: '2026-03-03' })).toEqual({
      query: { since: '2026-03-03T00:00:00Z', until: '2026-03-04T00:00:00Z' },
    });
    const refused = auditQuery({ ...noFilters(), from: '2026-03-03', to: '2026-03-02' });
    expect('problem' in refused && refused.problem).toBeInstanceOf(ApiFailure);
    expect('problem' in refused && refused.problem.param).toBe('until');
    expect('problem' in refused && refused.problem.message).toContain('2026-03-02');
  });

  it('leaves a limit the API refuses for the API to name', () => {
    expect(auditQuery({ ...noFilters(), limit: '5000' })).toEqual({ query: { limit: '5000' } });
  });

  it('suggests every audit action of docs/api/operator.md once', () => {
    expect(new Set(AUDIT_ACTIONS).size).toBe(AUDIT_ACTIONS.length);
    expect(AUDIT_ACTIONS).toEqual(expect.arrayContaining(['provider_key.saved', 'org.member_added', 'webhook.paused']));
  });
});

describe('audit log entries', () => {
  it('names the actor, and the acting account only when it is not the log’s own', () => {
    expect(actorOf({ actor: 'key:key_1', actor_account_id: 'acc_1', account_id: 'acc_1' })).toEqual({
      who: 'Key key_1',
      key: 'key_1',
      keyName: null,
      account: null,
    });
    expect(actorOf({ actor: 'key:key_2', actor_account_id: 'acc_2', account_id: 'acc_1' })).toEqual({
      who: 'Key key_2',
      key: 'key_2',
      keyName: null,
      account: 'acc_2',
    });
    // A key of the workspace by its name, the id kept beside it.
    const names = new Map([['key_1', 'deploy bot']]);
    expect(actorOf({ actor: 'key:key_1', actor_account_id: 'acc_1', account_id: 'acc_1' }, names)).toEqual({
      who: 'Key “deploy bot”',
      key: 'key_1',
      keyName: 'deploy bot',
      account: null,
    });
    expect(actorOf({ actor: 'admin', actor_account_id: null, account_id: 'acc_1' }).who).toBe('Operator (admin API)');
    expect(actorOf({ actor: 'cli', actor_account_id: null, account_id: 'acc_1' }).who).toBe('Operator (CLI)');
    expect(actorOf({ actor: 'constructor', actor_account_id: null, account_id: 'acc_1' }).who).toBe('constructor');
  });

  it('summarises the details of each kind of action in a line', () => {
    expect(detailsSummary({ action: 'provider_key.saved', details: { provider: 'sim', hint: '...wxyz' } })).toBe('sim ...wxyz');
    expect(detailsSummary({ action: 'org.member_added', details: { account_id: 'acc_2', role: 'admin' } })).toBe('acc_2 as admin');
    expect(detailsSummary({ action: 'org.member_removed', details: { account_id: 'acc_2' } })).toBe('acc_2');
    expect(detailsSummary({ action: 'key.updated', details: { fields: ['limit', 'name'] } })).toBe('changed limit, name');
    expect(detailsSummary({ action: 'key.created', details: { name: 'ci', scope: 'full', environment: 'live', org_id: null } })).toBe('“ci”, full scope, live');
    expect(detailsSummary({ action: 'credits.added', details: { amount_usd: 10, reason: 'top-up' } })).toBe('$10.00 (top-up)');
    expect(detailsSummary({ action: 'account.daily_limit_set', details: { daily_limit_usd: null } })).toBe('daily limit removed');
    expect(detailsSummary({ action: 'settings.step_up_set', details: { enabled: true, email: 'a@example.com' } })).toBe('on, codes to a@example.com');
    expect(detailsSummary({ action: 'webhook.saved', details: { url: 'https://h.example/x', events: null, new_secret: true } })).toBe(
      'https://h.example/x, all events, new secret',
    );
    expect(detailsSummary({ action: 'webhook.saved', details: { url: 'https://h.example/x', events: ['key.created'], new_secret: false } })).toBe(
      'https://h.example/x, key.created',
    );
  });

  it('shows a time to the second, in UTC', () => {
    expect(atSecond('2026-03-01T10:20:30.456Z')).toBe('2026-03-01 10:20:30 UTC');
    expect(atSecond('not a time')).toBe('not a time');
  });

  it('falls back to the fields of an action it does not know, leaving out empty ones', () => {
    expect(detailsSummary({ action: 'preset.updated', details: { name: 'Support', description: null } })).toBe('name: Support');
    expect(detailsSummary({ action: 'future.thing', details: { dry_run: true, ids: ['a', 'b'] } })).toBe('dry run: on, ids: a, b');
    expect(detailsSummary({ action: 'key.revoked', details: {} })).toBe('');
  });
});
