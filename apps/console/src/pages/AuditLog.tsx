import { useState, type FormEvent, type ReactNode } from 'react';
import { api, query, type Session } from '../api';
import { atSecond } from '../format';
import type { KeyNames } from '../keyNames';
import type { AuditEntry } from '../records';
import { Breakable, Card, Empty, FieldError, isAbout, LoadState, Page, Stamp, Table, useLoad } from '../ui';
import { keyRef } from '../keyNames';
import { actorOf, AUDIT_ACTIONS, auditQuery, DEFAULT_LIMIT, detailsSummary, MAX_LIMIT, noFilters, type AuditFilters, type AuditQuery } from './auditLog';
import { useKeyNames } from './useKeyNames';
import './AuditLog.css';

/** The query parameters a filter of the form sets, as the API names them in `param`. */
const FILTER_PARAMS = ['action', 'since', 'until', 'limit'];

export function AuditLog(_: { session: Session }) {
  const [form, setForm] = useState<AuditFilters>(noFilters);
  /** What the table shows; null while the form holds a problem of its own. */
  const [applied, setApplied] = useState<AuditQuery | null>({});
  const [problem, setProblem] = useState<unknown>(null);
  const names = useKeyNames();
  const log = useLoad(
    () => (applied ? api<{ data: AuditEntry[] }>('GET', `/audit-log${query(applied)}`).then((r) => r.data) : Promise.resolve(null)),
    [applied],
  );

  const apply = (filters: AuditFilters) => {
    const checked = auditQuery(filters);
    if ('problem' in checked) {
      setProblem(checked.problem);
      setApplied(null);
      return;
    }
    setProblem(null);
    // A new object each time: applying the same filters again reads the log again.
    setApplied({ ...checked.query });
  };

  const error = problem ?? log.error;
  const onFilter = FILTER_PARAMS.some((p) => isAbout(error, p));
  const limit = Number(applied?.limit ?? DEFAULT_LIMIT);

  return (
    <Page
      title="Audit log"
      intro="Who changed what in this account, from where and when: keys, organizations, provider keys, settings, presets and credits. Newest first."
    >
      <Card title="Filters">
        <FilterForm
          form={form}
          error={error}
          onChange={setForm}
          onApply={() => apply(form)}
          onClear={() => {
            setForm(noFilters());
            apply(noFilters());
          }}
        />
      </Card>
      <Card title="Entries">
        <LoadState
          loaded={{ ...log, error }}
          what="the audit log"
          failed={onFilter ? <Empty>Fix the filter marked above to see entries.</Empty> : undefined}
          empty={
            applied && Object.keys(applied).some((k) => k !== 'limit') ? 'No entry matches these filters.' : 'Nothing has been changed in this account yet.'
          }
        >
          {(entries) => (
            <>
              <p className="muted small" role="status">
                {entries.length === limit
                  ? `The newest ${limit} entries; older ones may match too: narrow the dates or raise the limit.`
                  : `${entries.length} ${entries.length === 1 ? 'entry' : 'entries'}.`}
              </p>
              <EntriesTable entries={entries} names={names} />
            </>
          )}
        </LoadState>
      </Card>
    </Page>
  );
}

function FilterForm({
  form,
  error,
  onChange,
  onApply,
  onClear,
}: {
  form: AuditFilters;
  error: unknown;
  onChange: (form: AuditFilters) => void;
  onApply: () => void;
  onClear: () => void;
}) {
  const set = (field: keyof AuditFilters, value: string) => onChange({ ...form, [field]: value });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    onApply();
  };
  /** A filter's control: labelled, described by its hint, or by the API's error about it. */
  const field = (param: string, id: string, label: string, control: (describedBy: string, invalid: boolean) => ReactNode, hint: string) => {
    const invalid = isAbout(error, param);
    return (
      <div className="field">
        <label htmlFor={id}>{label}</label>
        {control(invalid ? `${param}-error` : `${id}-hint`, invalid)}
        <p className="hint" id={`${id}-hint`}>
          {hint}
        </p>
        <FieldError error={error} field={param} />
      </div>
    );
  };
  return (
    <form onSubmit={submit} noValidate aria-label="Audit log filters">
      <div className="inline audit-filters">
        {field(
          'action',
          'audit-action',
          'Action',
          (describedBy, invalid) => (
            <>
              <input
                id="audit-action"
                list="audit-actions"
                value={form.action}
                spellCheck={false}
                autoComplete="off"
                placeholder="All actions"
                onChange={(e) => set('action', e.target.value)}
                aria-invalid={invalid || undefined}
                aria-describedby={describedBy}
              />
              <datalist id="audit-actions">
                {AUDIT_ACTIONS.map((a) => (
                  <option key={a} value={a} />
                ))}
              </datalist>
            </>
          ),
          'Pick one, or type one such as key.created.',
        )}
        {field(
          'since',
          'audit-from',
          'From (UTC)',
          (describedBy, invalid) => (
            <input
              id="audit-from"
              type="date"
              value={form.from}
              onChange={(e) => set('from', e.target.value)}
              aria-invalid={invalid || undefined}
              aria-describedby={describedBy}
            />
          ),
          'From the start of this day.',
        )}
        {field(
          'until',
          'audit-to',
          'To (UTC, included)',
          (describedBy, invalid) => (
            <input
              id="audit-to"
              type="date"
              value={form.to}
              min={form.from || undefined}
              onChange={(e) => set('to', e.target.value)}
              aria-invalid={invalid || undefined}
              aria-describedby={describedBy}
            />
          ),
          'To the end of this day.',
        )}
        {field(
          'limit',
          'audit-limit',
          'Limit',
          (describedBy, invalid) => (
            <input
              id="audit-limit"
              type="number"
              inputMode="numeric"
              min={1}
              max={MAX_LIMIT}
              value={form.limit}
              onChange={(e) => set('limit', e.target.value)}
              aria-invalid={invalid || undefined}
              aria-describedby={describedBy}
            />
          ),
          `Newest entries, 1 to ${MAX_LIMIT}.`,
        )}
      </div>
      <div className="form-actions">
        <button type="submit">Apply filters</button>
        <button type="button" className="secondary" onClick={onClear}>
          Clear filters
        </button>
      </div>
    </form>
  );
}

function EntriesTable({ entries, names }: { entries: AuditEntry[]; names: KeyNames }) {
  return (
    <Table label="Audit log entries">
      <thead>
        <tr>
          <th scope="col">Time</th>
          <th scope="col">Actor</th>
          <th scope="col">IP</th>
          <th scope="col">Action</th>
          <th scope="col">Target</th>
          <th scope="col">Details</th>
        </tr>
      </thead>
      <tbody>
        {entries.map((entry) => {
          const actor = actorOf(entry, names);
          const target = entry.action.startsWith('key.') && entry.target_id ? keyRef(`key:${entry.target_id}`, names) : null;
          return (
            <tr key={entry.id}>
              <td>
                <Stamp text={atSecond(entry.at)} at={entry.at} />
              </td>
              <td className="audit-actor">
                {actor.keyName ? (
                  <>
                    <span>Key “{actor.keyName}”</span>
                    <div className="muted small mono">{actor.key}</div>
                  </>
                ) : actor.key ? (
                  <>
                    Key <span className="mono">{actor.key}</span>
                  </>
                ) : (
                  actor.who
                )}
                {actor.account && <div className="muted small mono">{actor.account}</div>}
              </td>
              <td className="mono nowrap">{entry.ip ?? <span className="muted">—</span>}</td>
              <td className="mono words audit-action">
                <Breakable text={entry.action} />
              </td>
              <td className="audit-target">
                {target?.name ? (
                  <>
                    <span>“{target.name}”</span>
                    <div className="muted small mono">{target.id}</div>
                  </>
                ) : (
                  <span className="mono">{entry.target_id}</span>
                )}
              </td>
              <td className="audit-details">{detailsSummary(entry) || <span className="muted">—</span>}</td>
            </tr>
          );
        })}
      </tbody>
    </Table>
  );
}
