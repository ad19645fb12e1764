import { useState, type FormEvent, type ReactNode } from 'react';
import { api, ApiFailure, type Session } from '../api';
import { periodName, usd, usedShare, when } from '../format';
import type { ContentAction, Guardrail, GuardrailBudget, GuardrailDetail, KeyGuardrail, KeyRecord, LimitReset, OrgMember } from '../records';
import { Card, ConfirmButton, describedBy, ErrorText, FieldError, FormError, isAbout, LoadState, Notice, Page, Stamp, Table, useAction, useLoad } from '../ui';
import {
  accessRules,
  BUILTIN_NAMES,
  BUILTIN_SLUGS,
  CONTENT_ACTIONS,
  createGuardrailBody,
  emptyGuardrailForm,
  filtersSummary,
  GUARDRAIL_FIELDS,
  guardrailFormOf,
  RESET_INTERVALS,
  updateGuardrailBody,
  type Checked,
  type GuardrailBody,
  type GuardrailFormValues,
  type PatternValues,
} from './guardrailForm';
import './Guardrails.css';

const guardrailPath = (id: string) => `/guardrails/${encodeURIComponent(id)}`;

/** A guardrail with its budgets and whom it is assigned to. */
interface GuardrailView extends GuardrailDetail {
  keyIds: string[];
  memberIds: string[];
  organization: boolean;
}

interface GuardrailsData {
  guardrails: GuardrailView[];
  /** The workspace's keys, to name the assigned ones and to pick from. */
  keys: KeyRecord[];
  /** The organization's people; null for an account's own workspace, which has none. */
  members: OrgMember[] | null;
}

/**
 * Everything the page shows: the guardrails, each with its budgets and assignments. The API has
 * no call that says which guardrail is the workspace-wide one, but GET /v1/key lists the
 * guardrails over the signed-in key, and the workspace-wide one is over every key.
 */
async function loadGuardrails(session: Session): Promise<GuardrailsData> {
  const list = (await api<{ data: Guardrail[] }>('GET', '/guardrails')).data;
  const [own, keys, members, guardrails] = await Promise.all([
    api<{ data: { guardrails?: KeyGuardrail[] } }>('GET', '/key').then((r) => r.data.guardrails ?? []),
    api<{ data: KeyRecord[] }>('GET', '/keys').then((r) => r.data),
    session.organizationId
      ? api<{ data: OrgMember[] }>('GET', `/organizations/${encodeURIComponent(session.organizationId)}/members`).then((r) => r.data)
      : Promise.resolve(null),
    Promise.all(
      list.map(async (g) => {
        const [detail, keyIds, memberIds] = await Promise.all([
          api<{ data: GuardrailDetail }>('GET', guardrailPath(g.id)).then((r) => r.data),
          api<{ data: { key_id: string }[] }>('GET', `${guardrailPath(g.id)}/assignments/keys`).then((r) => r.data.map((a) => a.key_id)),
          api<{ data: { member_id: string }[] }>('GET', `${guardrailPath(g.id)}/assignments/members`).then((r) => r.data.map((a) => a.member_id)),
        ]);
        return { ...detail, keyIds, memberIds, organization: false };
      }),
    ),
  ]);
  const workspaceWide = own.find((g) => g.scope === 'organization')?.id ?? null;
  return { guardrails: guardrails.map((g) => ({ ...g, organization: g.id === workspaceWide })), keys, members };
}

type Editing = { kind: 'create' } | { kind: 'edit'; guardrail: Guardrail; initial: GuardrailFormValues };

/** The API's refusal of a member's key: the page says who may manage guardrails instead. */
const notManager = (error: unknown) => error instanceof ApiFailure && error.status === 403;

export function Guardrails({ session }: { session: Session }) {
  const loaded = useLoad(() => loadGuardrails(session), []);
  const [editing, setEditing] = useState<Editing | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const refused = notManager(loaded.error);

  const done = (message: string | null) => {
    setEditing(null);
    setNotice(message);
    loaded.reload();
  };

  return (
    <Page
      title="Guardrails"
      intro="Named policies over the workspace’s keys: a budget per key, member or the whole workspace, which models and providers may serve, and content filters. Only the workspace’s owner and its organization’s admins manage them."
      actions={
        !refused && (
          <>
            <button type="button" className="secondary" onClick={loaded.reload} disabled={loaded.loading}>
              Refresh
            </button>
            <button type="button" onClick={() => (setNotice(null), setEditing({ kind: 'create' }))} disabled={editing?.kind === 'create'}>
              New guardrail
            </button>
          </>
        )
      }
    >
      <Notice>{notice}</Notice>
      {editing && (
        <GuardrailEditor
          key={editing.kind === 'edit' ? editing.guardrail.id : 'create'}
          editing={editing}
          onCancel={() => setEditing(null)}
          onSaved={(message) => done(message)}
        />
      )}
      <LoadState
        loaded={loaded}
        what="guardrails"
        failed={
          refused ? (
            <Card title="Managed by the owner and admins">
              <p>
                Guardrails apply to everyone’s keys, so only the workspace’s owner and its organization’s admins see and change them. Your key can still read
                the guardrails over itself with <span className="mono">GET /v1/key</span>.
              </p>
              <ErrorText error={loaded.error} />
            </Card>
          ) : undefined
        }
      >
        {(data) =>
          data.guardrails.length === 0 ? (
            <Card title="All guardrails">
              <p className="empty">No guardrails yet. Create one with “New guardrail”.</p>
            </Card>
          ) : (
            data.guardrails.map((g) => (
              <GuardrailCard
                key={g.id}
                guardrail={g}
                data={data}
                session={session}
                onEdit={() => (setNotice(null), setEditing({ kind: 'edit', guardrail: g, initial: guardrailFormOf(g) }))}
                onChanged={(message) => (setNotice(message), loaded.reload())}
                onDeleted={() => done(`Deleted ${g.name}. Its assignments and budgets went with it.`)}
              />
            ))
          )
        }
      </LoadState>
    </Page>
  );
}

/** A key as a person knows it: its name, else its id. */
const keyName = (keys: KeyRecord[], id: string) => {
  const key = keys.find((k) => k.id === id);
  return key?.name || id;
};

function GuardrailCard({
  guardrail: g,
  data,
  session,
  onEdit,
  onChanged,
  onDeleted,
}: {
  guardrail: GuardrailView;
  data: GuardrailsData;
  session: Session;
  onEdit: () => void;
  onChanged: (message: string) => void;
  onDeleted: () => void;
}) {
  const [assigning, setAssigning] = useState(false);
  const titleId = `guardrail-${g.id}`;
  const assigned: ReactNode[] = [];
  if (g.organization) assigned.push(<li key="org">the whole workspace (every key)</li>);
  if (g.memberIds.length) assigned.push(<li key="members">members: {g.memberIds.map((m) => memberName(m, session)).join(', ')}</li>);
  if (g.keyIds.length) assigned.push(<li key="keys">keys: {g.keyIds.map((k) => keyName(data.keys, k)).join(', ')}</li>);
  return (
    <section className="card guardrail" aria-labelledby={titleId}>
      <div className="card-head">
        <h2 id={titleId}>
          {g.name} {g.organization && <span className="badge ok">workspace-wide</span>}
        </h2>
        <div className="page-actions">
          <button type="button" className="secondary" onClick={onEdit} aria-label={`Edit ${g.name}`}>
            Edit
          </button>
          <button
            type="button"
            className="secondary"
            onClick={() => setAssigning((a) => !a)}
            aria-expanded={assigning}
            aria-controls={`${titleId}-assign`}
            aria-label={`Assignments of ${g.name}`}
          >
            Assignments
          </button>
          <ConfirmButton
            label="Delete"
            title={`Delete ${g.name}?`}
            confirmLabel="Delete guardrail"
            message={<p>Its assignments go with it: its keys, members and the workspace are no longer held to its budget, model rules and filters.</p>}
            onConfirm={async () => {
              await api('DELETE', guardrailPath(g.id));
              onDeleted();
            }}
          />
        </div>
      </div>
      <p className="muted small guardrail-id">
        <span className="mono">{g.id}</span>
        {g.description && <> · {g.description}</>}
      </p>
      <dl className="guardrail-facts">
        <dt>Budget</dt>
        <dd>
          {g.limit_usd === null ? (
            <span className="muted">no budget</span>
          ) : (
            <>
              {usd(g.limit_usd)} {periodName(g.reset_interval)} for each key, member or workspace it is assigned to
              {g.include_byok_in_budgets && <span className="muted">, BYOK requests included</span>}
            </>
          )}
        </dd>
        <dt>Access</dt>
        <dd>{accessRules(g).join('; ')}</dd>
        <dt>Content filters</dt>
        <dd>{filtersSummary(g)}</dd>
        <dt>Assigned to</dt>
        <dd>{assigned.length ? <ul className="guardrail-assigned">{assigned}</ul> : <span className="muted">nothing yet: it applies to no request</span>}</dd>
      </dl>
      {g.limit_usd !== null && g.budgets.length > 0 && <Budgets guardrail={g} keys={data.keys} session={session} />}
      {assigning && (
        <div id={`${titleId}-assign`}>
          <Assignments guardrail={g} data={data} session={session} onChanged={onChanged} />
        </div>
      )}
    </section>
  );
}

const memberName = (id: string, session: Session) => (id === session.accountId ? `${id} (you)` : id);

/** Whose budget a row is: its name, and under it what kind of subject it is. */
function subjectOf(b: GuardrailBudget, keys: KeyRecord[], session: Session): ReactNode {
  if (b.scope === 'organization')
    return (
      <>
        Whole workspace<div className="muted small">every key</div>
      </>
    );
  if (b.scope === 'member')
    return (
      <>
        <span className="mono">{memberName(b.subject, session)}</span>
        <div className="muted small">member, across their keys</div>
      </>
    );
  const key = keys.find((k) => k.id === b.subject);
  return (
    <>
      {key?.name || <span className="mono">{b.subject}</span>}
      <div className="muted small">key{key && <span className="mono"> {key.hint}</span>}</div>
    </>
  );
}

/** Each assigned subject's window: spent, held by requests in flight, what is left, and when it starts again. */
function Budgets({ guardrail: g, keys, session }: { guardrail: GuardrailView; keys: KeyRecord[]; session: Session }) {
  return (
    <div className="guardrail-budgets">
      <Table label={`Budgets of ${g.name}`}>
        <thead>
          <tr>
            <th scope="col">Budget of</th>
            <th scope="col" className="num">
              Spent
            </th>
            <th scope="col" className="num">
              Held
            </th>
            <th scope="col" className="num">
              Remaining
            </th>
            <th scope="col">Resets</th>
          </tr>
        </thead>
        <tbody>
          {g.budgets.map((b) => {
            const share = usedShare(g.limit_usd, b.remaining_usd);
            return (
              <tr key={`${b.scope}:${b.subject}`}>
                <th scope="row">{subjectOf(b, keys, session)}</th>
                <td className="num" data-label="Spent">
                  {usd(b.spent_usd)}
                </td>
                <td className="num" data-label="Held">
                  {usd(b.held_usd)}
                </td>
                <td className="num" data-label="Remaining">
                  <span className="guardrail-remaining">
                    {usd(b.remaining_usd)} of {usd(g.limit_usd)}
                  </span>
                  {share !== null && (
                    <meter
                      className="gauge"
                      min={0}
                      max={1}
                      low={0.75}
                      high={0.9}
                      optimum={0}
                      value={share}
                      aria-label={`${Math.round(share * 100)}% of the budget used`}
                    />
                  )}
                </td>
                <td data-label="Resets">{b.resets_at ? <Stamp text={when(b.resets_at)} at={b.resets_at} /> : <span className="muted">never</span>}</td>
              </tr>
            );
          })}
        </tbody>
      </Table>
    </div>
  );
}

/** Assigns and unassigns the guardrail's keys, members and the workspace. */
function Assignments({
  guardrail: g,
  data,
  session,
  onChanged,
}: {
  guardrail: GuardrailView;
  data: GuardrailsData;
  session: Session;
  onChanged: (message: string) => void;
}) {
  const path = guardrailPath(g.id);
  const onOther = (scope: 'keyIds' | 'memberIds', id: string) => data.guardrails.find((o) => o.id !== g.id && o[scope].includes(id));
  const keyChoices = data.keys
    .filter((k) => !k.revoked && !g.keyIds.includes(k.id))
    .map((k) => {
      const other = onOther('keyIds', k.id);
      return { id: k.id, name: k.name || k.id, label: `${k.name || k.id} (${k.hint})${other ? `, now on ${other.name}` : ''}` };
    });
  const memberChoices = (data.members ?? [])
    .filter((m) => !g.memberIds.includes(m.account_id))
    .map((m) => {
      const other = onOther('memberIds', m.account_id);
      return { id: m.account_id, name: m.account_id, label: `${memberName(m.account_id, session)}, ${m.role}${other ? `, now on ${other.name}` : ''}` };
    });
  const otherWide = data.guardrails.find((o) => o.id !== g.id && o.organization);

  return (
    <div className="guardrail-assign">
      <h3>Assignments</h3>
      <p className="hint">A key or member holds one guardrail: assigning it here moves it from the one it was on.</p>
      <OrganizationAssignment guardrail={g} otherWide={otherWide} path={path} onChanged={onChanged} />
      <SubjectAssignments
        title="Keys"
        field="key_ids"
        route={`${path}/assignments/keys`}
        guardrailName={g.name}
        assigned={g.keyIds.map((id) => ({ id, label: keyName(data.keys, id) }))}
        choices={keyChoices}
        pickLabel="Key to assign"
        emptyChoices="Every key of the workspace is on this guardrail."
        onChanged={onChanged}
      />
      {data.members === null ? (
        <div className="guardrail-subjects">
          <h4>Members</h4>
          <p className="muted small">This workspace is an account of its own, not an organization: it has no members to assign. Assign its keys.</p>
        </div>
      ) : (
        <SubjectAssignments
          title="Members"
          field="member_ids"
          route={`${path}/assignments/members`}
          guardrailName={g.name}
          assigned={g.memberIds.map((id) => ({ id, label: memberName(id, session) }))}
          choices={memberChoices}
          pickLabel="Member to assign"
          emptyChoices="Every member of the organization is on this guardrail."
          onChanged={onChanged}
        />
      )}
    </div>
  );
}

function OrganizationAssignment({
  guardrail: g,
  otherWide,
  path,
  onChanged,
}: {
  guardrail: GuardrailView;
  otherWide: GuardrailView | undefined;
  path: string;
  onChanged: (message: string) => void;
}) {
  const { busy, error, run } = useAction();
  const toggle = async () => {
    const route = `${path}/assignments/organization${g.organization ? '/remove' : ''}`;
    const done = await run(() => api('POST', route));
    if (done !== undefined)
      onChanged(g.organization ? `${g.name} no longer applies to the whole workspace.` : `${g.name} now applies to every key of the workspace.`);
  };
  return (
    <div className="guardrail-subjects">
      <h4>Whole workspace</h4>
      <p className="small">
        {g.organization
          ? 'It applies to every key of the workspace, under the members’ and keys’ own guardrails.'
          : otherWide
            ? `${otherWide.name} is the workspace-wide guardrail now: making this one workspace-wide replaces it.`
            : 'Workspace-wide, it applies to every key of the workspace.'}
      </p>
      <button type="button" className="secondary" onClick={toggle} disabled={busy}>
        {busy ? 'Working…' : g.organization ? 'Stop applying to every key' : 'Apply to every key'}
      </button>
      <ErrorText error={error} />
    </div>
  );
}

function SubjectAssignments({
  title,
  field,
  route,
  guardrailName,
  assigned,
  choices,
  pickLabel,
  emptyChoices,
  onChanged,
}: {
  title: string;
  field: 'key_ids' | 'member_ids';
  route: string;
  guardrailName: string;
  assigned: { id: string; label: string }[];
  choices: { id: string; name: string; label: string }[];
  pickLabel: string;
  emptyChoices: string;
  onChanged: (message: string) => void;
}) {
  const [picked, setPicked] = useState('');
  const { busy, error, run } = useAction();
  const selectId = `${route.replace(/[^\w-]+/g, '-')}-pick`;
  const what = title === 'Keys' ? 'key' : 'member';

  const assign = async (e: FormEvent) => {
    e.preventDefault();
    const id = picked || choices[0]?.id;
    if (!id) return;
    const label = choices.find((c) => c.id === id)?.name ?? id;
    const done = await run(() => api<{ assigned_count: number }>('POST', route, { body: { [field]: [id] } }));
    if (!done) return;
    setPicked('');
    onChanged(done.assigned_count ? `Assigned ${what} ${label} to ${guardrailName}.` : `${label} was already on ${guardrailName}.`);
  };
  const unassign = async (subject: { id: string; label: string }) => {
    const done = await run(() => api<{ unassigned_count: number }>('POST', `${route}/remove`, { body: { [field]: [subject.id] } }));
    if (done) onChanged(`Unassigned ${what} ${subject.label} from ${guardrailName}.`);
  };

  return (
    <div className="guardrail-subjects">
      <h4>{title}</h4>
      {assigned.length === 0 ? (
        <p className="muted small">None.</p>
      ) : (
        <ul className="guardrail-subject-list" aria-label={`${title} on ${guardrailName}`}>
          {assigned.map((s) => (
            <li key={s.id}>
              <span>
                {s.label}
                {s.label !== s.id && <span className="mono small muted"> {s.id}</span>}
              </span>
              <button type="button" className="secondary" disabled={busy} onClick={() => unassign(s)} aria-label={`Unassign ${s.label}`}>
                Unassign
              </button>
            </li>
          ))}
        </ul>
      )}
      {choices.length === 0 ? (
        <p className="muted small">{emptyChoices}</p>
      ) : (
        <form onSubmit={assign} className="inline" noValidate aria-label={`Assign a ${what} to ${guardrailName}`}>
          <div className="field">
            <label htmlFor={selectId}>{pickLabel}</label>
            <select
              id={selectId}
              value={picked || choices[0]!.id}
              onChange={(e) => setPicked(e.target.value)}
              aria-invalid={isAbout(error, field) || undefined}
              aria-describedby={describedBy(error, field)}
            >
              {choices.map((c) => (
                <option key={c.id} value={c.id}>
                  {c.label}
                </option>
              ))}
            </select>
            <FieldError error={error} field={field} />
          </div>
          <div className="form-actions">
            <button type="submit" disabled={busy}>
              {busy ? 'Assigning…' : `Assign ${what}`}
            </button>
          </div>
        </form>
      )}
      <FormError error={error} fields={[field]} />
    </div>
  );
}

/** A value the form refused before sending, worded and placed as the API's own 400 would be. */
const problemOf = (checked: Checked<GuardrailBody>) => (checked.problem ? new ApiFailure(400, null, checked.problem.param, checked.problem.message) : null);

/** The create form, or the edit form of one guardrail: every field of docs/api/guardrails.md. */
function GuardrailEditor({ editing, onCancel, onSaved }: { editing: Editing; onCancel: () => void; onSaved: (message: string) => void }) {
  const [values, setValues] = useState<GuardrailFormValues>(() => (editing.kind === 'edit' ? editing.initial : emptyGuardrailForm()));
  const { busy, error, setError, run } = useAction();
  const set = <F extends keyof GuardrailFormValues>(field: F, value: GuardrailFormValues[F]) => setValues((v) => ({ ...v, [field]: value }));
  const setPattern = (i: number, change: Partial<PatternValues>) =>
    setValues((v) => ({ ...v, content_filters: v.content_filters.map((f, j) => (i === j ? { ...f, ...change } : f)) }));

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    if (editing.kind === 'create') {
      const checked = createGuardrailBody(values);
      if (!checked.body) return setError(problemOf(checked));
      const body = checked.body;
      const created = await run(() => api<{ data: Guardrail }>('POST', '/guardrails', { body }));
      if (created) onSaved(`Created ${created.data.name}. Assign it to keys, members or the whole workspace for it to apply.`);
      return;
    }
    const checked = updateGuardrailBody(editing.initial, values);
    if (!checked.body) return setError(problemOf(checked));
    const body = checked.body;
    if (Object.keys(body).length === 0) return onSaved(`Nothing changed on ${editing.guardrail.name}.`);
    const saved = await run(() => api<{ data: Guardrail }>('PATCH', guardrailPath(editing.guardrail.id), { body }));
    if (saved) onSaved(`Saved ${saved.data.name}.`);
  };

  const title = editing.kind === 'create' ? 'New guardrail' : `Edit ${editing.guardrail.name}`;
  /** A labelled control with its hint and the API's failure when it names the field. */
  const field = (name: keyof GuardrailBody, label: string, control: ReactNode, hint?: ReactNode) => (
    <div className="field">
      <label htmlFor={`guardrail-${name}`}>{label}</label>
      {control}
      {hint && (
        <p className="hint" id={`guardrail-${name}-hint`}>
          {hint}
        </p>
      )}
      <FieldError error={error} field={name} />
    </div>
  );
  const aria = (name: keyof GuardrailBody, hint: boolean) => ({
    'aria-invalid': isAbout(error, name) || undefined,
    'aria-describedby': describedBy(error, name, hint ? `guardrail-${name}-hint` : undefined),
  });
  const text = (name: 'name' | 'description' | 'limit_usd', extra: Record<string, unknown> = {}, hint = false) => (
    <input
      id={`guardrail-${name}`}
      type="text"
      autoComplete="off"
      spellCheck={false}
      value={values[name]}
      onChange={(e) => set(name, e.target.value)}
      {...aria(name, hint)}
      {...extra}
    />
  );
  const list = (name: 'allowed_models' | 'ignored_models' | 'allowed_providers' | 'ignored_providers', placeholder: string) => (
    <textarea
      id={`guardrail-${name}`}
      rows={2}
      spellCheck={false}
      placeholder={placeholder}
      value={values[name]}
      onChange={(e) => set(name, e.target.value)}
      {...aria(name, true)}
    />
  );
  const check = (name: 'include_byok_in_budgets' | 'enforce_zdr' | 'deny_data_collection', param: keyof GuardrailBody, label: string, hint: string) => (
    <div className="field">
      <label>
        <input
          type="checkbox"
          checked={values[name]}
          onChange={(e) => set(name, e.target.checked)}
          aria-invalid={isAbout(error, param) || undefined}
          aria-describedby={describedBy(error, param, `guardrail-${name}-hint`)}
        />{' '}
        {label}
      </label>
      <p className="hint" id={`guardrail-${name}-hint`}>
        {hint}
      </p>
      <FieldError error={error} field={param} />
    </div>
  );

  return (
    <Card title={title}>
      <form onSubmit={submit} noValidate aria-label={title}>
        <div className="guardrail-form">
          <div>
            <fieldset>
              <legend>Guardrail</legend>
              {field('name', 'Name', text('name', { autoFocus: true, maxLength: 200 }))}
              {field(
                'description',
                'Description',
                <textarea
                  id="guardrail-description"
                  rows={2}
                  maxLength={2000}
                  value={values.description}
                  onChange={(e) => set('description', e.target.value)}
                  {...aria('description', true)}
                />,
                'Optional.',
              )}
            </fieldset>
            <fieldset>
              <legend>Budget</legend>
              {field(
                'limit_usd',
                'Budget limit (USD)',
                text('limit_usd', { inputMode: 'decimal', placeholder: 'no budget' }, true),
                'Empty: no budget. Each key, member or workspace it is assigned to has a budget of this amount.',
              )}
              {field(
                'reset_interval',
                'Budget resets',
                <select
                  id="guardrail-reset_interval"
                  value={values.reset_interval}
                  onChange={(e) => set('reset_interval', e.target.value as LimitReset)}
                  {...aria('reset_interval', true)}
                >
                  {RESET_INTERVALS.map((r) => (
                    <option key={r.value} value={r.value}>
                      {r.label}
                    </option>
                  ))}
                </select>,
                'Windows start at 00:00 UTC.',
              )}
              {check(
                'include_byok_in_budgets',
                'include_byok_in_budgets',
                'Count requests on your own provider keys',
                'Requests made with a saved provider key (BYOK) count against the budget too.',
              )}
            </fieldset>
          </div>
          <fieldset>
            <legend>Models and providers</legend>
            {field('allowed_models', 'Allowed models', list('allowed_models', 'sim/echo, openai/gpt-4o'), 'Comma-separated. Empty: every model.')}
            {field('ignored_models', 'Ignored models', list('ignored_models', 'none'), 'Never served, even when allowed.')}
            {field('allowed_providers', 'Allowed providers', list('allowed_providers', 'openai, anthropic'), 'Comma-separated. Empty: every provider.')}
            {field('ignored_providers', 'Ignored providers', list('ignored_providers', 'none'), 'Never used, even when allowed.')}
            {check('enforce_zdr', 'enforce_zdr', 'Zero data retention only', 'Only endpoints that keep no prompt or answer.')}
            {check('deny_data_collection', 'data_collection', 'No data collection', 'Only endpoints that do not collect data for training.')}
          </fieldset>
        </div>
        <fieldset>
          <legend>Content filters</legend>
          <div className="guardrail-builtins" role="group" aria-describedby="guardrail-builtins-hint">
            {BUILTIN_SLUGS.map((slug) => (
              <div className="field" key={slug}>
                <label htmlFor={`guardrail-builtin-${slug}`}>{BUILTIN_NAMES[slug]}</label>
                <select
                  id={`guardrail-builtin-${slug}`}
                  value={values.builtins[slug]}
                  onChange={(e) => set('builtins', { ...values.builtins, [slug]: e.target.value as ContentAction | '' })}
                  aria-invalid={isAbout(error, 'content_filter_builtins') || undefined}
                  aria-describedby={describedBy(error, 'content_filter_builtins')}
                >
                  <option value="">off</option>
                  {CONTENT_ACTIONS.map((a) => (
                    <option key={a} value={a}>
                      {a}
                    </option>
                  ))}
                </select>
              </div>
            ))}
          </div>
          <p className="hint" id="guardrail-builtins-hint">
            Builtin detectors, applied to every request under the guardrail: flag reports a match, redact replaces it with its label, block refuses the request.
            Block wins over redact over flag.
          </p>
          <FieldError error={error} field="content_filter_builtins" />
          <h3 className="guardrail-patterns-title">Custom patterns</h3>
          {values.content_filters.length === 0 && <p className="muted small">None.</p>}
          {values.content_filters.map((f, i) => {
            const param = `content_filters[${i}]`;
            const invalid = isAbout(error, param) || undefined;
            return (
              <div className="guardrail-pattern" key={i} role="group" aria-label={`Custom pattern ${i + 1}`}>
                <div className="field guardrail-pattern-text">
                  <label htmlFor={`guardrail-pattern-${i}`}>Pattern {i + 1}</label>
                  <input
                    id={`guardrail-pattern-${i}`}
                    type="text"
                    className="mono"
                    autoComplete="off"
                    spellCheck={false}
                    placeholder="(?i)project falcon"
                    value={f.pattern}
                    onChange={(e) => setPattern(i, { pattern: e.target.value })}
                    aria-invalid={invalid}
                    aria-describedby={describedBy(error, param)}
                  />
                </div>
                <div className="field">
                  <label htmlFor={`guardrail-pattern-${i}-action`}>Action</label>
                  <select
                    id={`guardrail-pattern-${i}-action`}
                    value={f.action}
                    onChange={(e) => setPattern(i, { action: e.target.value as ContentAction })}
                    aria-label={`Action of pattern ${i + 1}`}
                  >
                    {CONTENT_ACTIONS.map((a) => (
                      <option key={a} value={a}>
                        {a}
                      </option>
                    ))}
                  </select>
                </div>
                <div className="field">
                  <label htmlFor={`guardrail-pattern-${i}-label`}>Label</label>
                  <input
                    id={`guardrail-pattern-${i}-label`}
                    type="text"
                    autoComplete="off"
                    placeholder="REDACTED"
                    value={f.label}
                    onChange={(e) => setPattern(i, { label: e.target.value })}
                    aria-label={`Label of pattern ${i + 1}`}
                  />
                </div>
                <div className="form-actions">
                  <button
                    type="button"
                    className="secondary"
                    onClick={() =>
                      set(
                        'content_filters',
                        values.content_filters.filter((_, j) => j !== i),
                      )
                    }
                    aria-label={`Remove pattern ${i + 1}`}
                  >
                    Remove
                  </button>
                </div>
                <div className="guardrail-pattern-error">
                  <FieldError error={error} field={param} />
                </div>
              </div>
            );
          })}
          <p className="hint">RE2 syntax, case-sensitive unless it starts with (?i). A redacted match becomes [label].</p>
          <div className="form-actions">
            <button
              type="button"
              className="secondary"
              onClick={() => set('content_filters', [...values.content_filters, { pattern: '', action: 'block', label: '' }])}
            >
              Add pattern
            </button>
          </div>
          {error instanceof ApiFailure && error.param === 'content_filters' && <ErrorText error={error} id="content_filters-error" />}
        </fieldset>
        <FormError error={error} fields={GUARDRAIL_FIELDS} />
        <div className="form-actions">
          <button type="submit" disabled={busy}>
            {busy ? 'Saving…' : editing.kind === 'create' ? 'Create guardrail' : 'Save changes'}
          </button>
          <button type="button" className="secondary" onClick={onCancel} disabled={busy}>
            Cancel
          </button>
        </div>
      </form>
    </Card>
  );
}
