import { Fragment, useState, type FormEvent } from 'react';
import { api, ApiFailure, query, type Session } from '../api';
import { count, lastDays, usd } from '../format';
import type { ActivityRow, Generation } from '../records';
import { Breakable, Card, describedBy, Empty, ErrorText, FieldError, FormError, isAbout, Loading, Page, Table, useAction, useLoad } from '../ui';
import {
  activityTotals,
  filterQuery,
  generationFacts,
  keyChoices,
  keyLabel,
  NO_FILTERS,
  otherUnits,
  statusLevel,
  type ActivityFilters,
  type KeyChoice,
} from './activity-data';
import './Activity.css';

const FILTER_FIELDS = ['date', 'key_id', 'user'];

export function Activity(_props: { session: Session }) {
  const keys = useLoad(() => api<{ data: KeyChoice[] }>('GET', '/keys').then((r) => keyChoices(r.data)), []);
  const [applied, setApplied] = useState<ActivityFilters>(NO_FILTERS);
  const activity = useLoad(() => api<{ data: ActivityRow[] }>('GET', `/activity${query(filterQuery(applied))}`).then((r) => r.data), [applied]);
  return (
    <Page
      title="Activity"
      intro="Usage of the last 30 UTC days, one line per day, model and endpoint. Requests, tokens and cost count billed requests; the others are “not billed”."
    >
      <Card title="Usage">
        <Filters keys={keys.data ?? []} keysError={keys.error} error={activity.error} onApply={setApplied} />
        <FormError error={activity.error} fields={FILTER_FIELDS} />
        {activity.error ? null : activity.loading || !activity.data ? (
          <Loading what="activity" />
        ) : (
          <ActivityTable rows={activity.data} filtered={Object.values(filterQuery(applied)).some((v) => v !== '')} />
        )}
      </Card>
      <Card title="Look up a generation">
        <GenerationLookup keys={keys.data ?? []} />
      </Card>
    </Page>
  );
}

function Filters({ keys, keysError, error, onApply }: { keys: KeyChoice[]; keysError: unknown; error: unknown; onApply: (filters: ActivityFilters) => void }) {
  const [filters, setFilters] = useState<ActivityFilters>(NO_FILTERS);
  // The picker offers the days the API covers; a typed day outside them gets the API's answer.
  const [days] = useState(() => lastDays(new Date(), 30));
  const set = (field: keyof ActivityFilters) => (e: { target: { value: string } }) => setFilters((f) => ({ ...f, [field]: e.target.value }));
  const submit = (e: FormEvent) => {
    e.preventDefault();
    onApply({ ...filters });
  };
  const clear = () => {
    setFilters(NO_FILTERS);
    onApply(NO_FILTERS);
  };
  return (
    <form className="toolbar" onSubmit={submit} aria-label="Filter activity" noValidate>
      <div className="field">
        <label htmlFor="activity-date">Date (UTC)</label>
        <input
          id="activity-date"
          type="date"
          min={days[0]}
          max={days[days.length - 1]}
          value={filters.date}
          onChange={set('date')}
          aria-invalid={isAbout(error, 'date') || undefined}
          aria-describedby={describedBy(error, 'date')}
        />
        <FieldError error={error} field="date" />
      </div>
      <div className="field">
        <label htmlFor="activity-key">Key</label>
        <select
          id="activity-key"
          value={filters.key_id}
          onChange={set('key_id')}
          aria-invalid={isAbout(error, 'key_id') || undefined}
          aria-describedby={describedBy(error, 'key_id')}
        >
          <option value="">All keys</option>
          {keys.map((k) => (
            <option key={k.id} value={k.id}>
              {keyLabel(k)}
            </option>
          ))}
        </select>
        <FieldError error={error} field="key_id" />
        <ErrorText error={keysError} />
      </div>
      <div className="field">
        <label htmlFor="activity-user">User</label>
        <input
          id="activity-user"
          type="text"
          spellCheck={false}
          autoComplete="off"
          value={filters.user}
          onChange={set('user')}
          aria-invalid={isAbout(error, 'user') || undefined}
          aria-describedby={describedBy(error, 'user', 'activity-user-hint')}
        />
        <p className="hint" id="activity-user-hint">
          The request's <code>safety_identifier</code> (else <code>user</code>).
        </p>
        <FieldError error={error} field="user" />
      </div>
      <div className="form-actions">
        <button type="submit">Apply filters</button>
        <button type="button" className="secondary" onClick={clear}>
          Clear
        </button>
      </div>
    </form>
  );
}

function ActivityTable({ rows, filtered }: { rows: ActivityRow[]; filtered: boolean }) {
  if (rows.length === 0) return <Empty>{filtered ? 'No activity matches these filters.' : 'No activity in the last 30 days.'}</Empty>;
  const totals = activityTotals(rows);
  const others = rows.map((r) => otherUnits(r));
  const hasOthers = others.some((o) => o.length > 0);
  return (
    <Table label="Activity by day, model and endpoint" className="activity-table">
      <thead>
        <tr>
          <th scope="col" rowSpan={2}>
            Date
          </th>
          <th scope="col" rowSpan={2}>
            Model and endpoint
          </th>
          <th scope="colgroup" colSpan={2} className="activity-group">
            Requests
          </th>
          <th scope="col" rowSpan={2} className="num">
            Cost
          </th>
          <th scope="colgroup" colSpan={4} className="activity-group">
            Tokens
          </th>
          {hasOthers && (
            <th scope="col" rowSpan={2}>
              Other units
            </th>
          )}
        </tr>
        <tr>
          <th scope="col" className="num">
            Billed
          </th>
          <th scope="col" className="num">
            Not billed
          </th>
          <th scope="col" className="num">
            Prompt
          </th>
          <th scope="col" className="num">
            Completion
          </th>
          <th scope="col" className="num">
            Cached
          </th>
          <th scope="col" className="num">
            Reasoning
          </th>
        </tr>
      </thead>
      <tbody>
        {rows.map((r, i) => (
          <tr key={`${r.date} ${r.model} ${r.endpoint}`}>
            <td className="nowrap">{r.date}</td>
            <td>
              <span className="mono words">
                <Breakable text={r.model} />
              </span>
              <span className="activity-endpoint mono words muted small">
                <Breakable text={r.endpoint} />
              </span>
            </td>
            <td className="num">{count(r.requests)}</td>
            <td className="num">{count(r.requests_not_billed)}</td>
            <td className="num">{usd(r.usage)}</td>
            <td className="num">{count(r.prompt_tokens)}</td>
            <td className="num">{count(r.completion_tokens)}</td>
            <td className="num">{count(r.cached_tokens)}</td>
            <td className="num">{count(r.reasoning_tokens)}</td>
            {hasOthers && <td>{others[i].join(', ')}</td>}
          </tr>
        ))}
      </tbody>
      <tfoot>
        <tr>
          <th scope="row" colSpan={2}>
            Total
          </th>
          <td className="num">{count(totals.requests)}</td>
          <td className="num">{count(totals.requests_not_billed)}</td>
          <td className="num">{usd(totals.usage)}</td>
          <td className="num">{count(totals.prompt_tokens)}</td>
          <td className="num">{count(totals.completion_tokens)}</td>
          <td className="num">{count(totals.cached_tokens)}</td>
          <td className="num">{count(totals.reasoning_tokens)}</td>
          {hasOthers && <td />}
        </tr>
      </tfoot>
    </Table>
  );
}

function GenerationLookup({ keys }: { keys: KeyChoice[] }) {
  const [id, setId] = useState('');
  const [generation, setGeneration] = useState<Generation | null>(null);
  const { busy, error, setError, run } = useAction();
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setGeneration(null);
    const wanted = id.trim();
    if (wanted === '') {
      setError(new ApiFailure(400, null, 'id', 'Enter a generation id (gen-…), as a model call answers it.'));
      return;
    }
    const found = await run(() =>
      api<{ data: Generation }>('GET', `/generation${query({ id: wanted })}`).catch((err: unknown) => {
        // Another workspace's generation reads as unknown too, so the message says "in this workspace".
        if (err instanceof ApiFailure && err.status === 404) throw new ApiFailure(404, err.code, 'id', 'No generation with that id in this workspace.');
        throw err;
      }),
    );
    if (found) setGeneration(found.data);
  };
  return (
    <>
      <form className="inline activity-lookup" onSubmit={submit} aria-label="Look up a generation" noValidate>
        <div className="field">
          <label htmlFor="generation-id">Generation id</label>
          <input
            id="generation-id"
            className="mono"
            type="text"
            spellCheck={false}
            autoComplete="off"
            placeholder="gen-…"
            value={id}
            onChange={(e) => setId(e.target.value)}
            aria-invalid={isAbout(error, 'id') || undefined}
            aria-describedby={describedBy(error, 'id', 'generation-id-hint')}
          />
          <p className="hint" id="generation-id-hint">
            The <code>id</code> of a model call's answer, or its <code>x-svc-generation-id</code> header; a <code>resp_…</code> id works too.
          </p>
          <FieldError error={error} field="id" />
        </div>
        <div className="form-actions">
          <button type="submit" disabled={busy}>
            {busy ? 'Looking up…' : 'Look up'}
          </button>
        </div>
      </form>
      <FormError error={error} fields={['id']} />
      {generation && <GenerationFacts generation={generation} keyName={keys.find((k) => k.id === generation.key_id)?.name ?? null} />}
    </>
  );
}

function GenerationFacts({ generation, keyName }: { generation: Generation; keyName: string | null }) {
  const level = statusLevel(generation.status);
  return (
    <section className="activity-generation" aria-labelledby="generation-title">
      <h3 id="generation-title">
        <span className="mono">{generation.id}</span> <span className={level ? `badge ${level}` : 'badge'}>{generation.status}</span>
      </h3>
      <dl>
        {generationFacts(generation, keyName).map(([term, value]) => (
          <Fragment key={term}>
            <dt>{term}</dt>
            <dd>{value}</dd>
          </Fragment>
        ))}
      </dl>
    </section>
  );
}
