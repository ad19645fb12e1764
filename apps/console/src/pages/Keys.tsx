import { useState, type FormEvent, type ReactNode } from 'react';
import { api, ApiFailure, type Session } from '../api';
import { periodName, usd, usedShare, when } from '../format';
import type { KeyRecord } from '../records';
import { useStepUp } from '../stepup';
import {
  Card,
  ConfirmButton,
  CopyButton,
  describedBy,
  Dialog,
  FieldError,
  FormError,
  isAbout,
  LoadState,
  Notice,
  Page,
  Table,
  useAction,
  useLoad,
} from '../ui';
import {
  createAction,
  createKeyBody,
  emptyKeyForm,
  GRACE_PERIODS,
  KEY_FIELDS,
  keyFormOf,
  keyStatus,
  updateAction,
  updateKeyBody,
  type Checked,
  type KeyBody,
  type KeyFormValues,
} from './keyForm';
import './Keys.css';

/** A create or rotate answer: the record and its secret, shown once. */
interface WithSecret {
  data: KeyRecord;
  key: string;
}

type Editing = { kind: 'create' } | { kind: 'edit'; key: KeyRecord; initial: KeyFormValues };

/** A value the form refused before sending, worded and placed as the API's own 400 would be. */
const problemOf = (checked: Checked<KeyBody>) => (checked.problem ? new ApiFailure(400, null, checked.problem.param, checked.problem.message) : null);

export function Keys({ session }: { session: Session }) {
  const keys = useLoad(() => api<{ data: KeyRecord[] }>('GET', '/keys').then((r) => r.data), []);
  const [editing, setEditing] = useState<Editing | null>(null);
  const [secret, setSecret] = useState<{ title: string; name: string | null; secret: string } | null>(null);
  const [rotating, setRotating] = useState<KeyRecord | null>(null);
  const [notice, setNotice] = useState<string | null>(null);

  const done = (message: string | null) => {
    setEditing(null);
    setNotice(message);
    keys.reload();
  };

  return (
    <Page
      title="Keys"
      intro="API keys of this workspace: their spend this month against their limit, and their restrictions. A secret is shown once, when the key is created or rotated."
      actions={
        <button type="button" onClick={() => (setNotice(null), setEditing({ kind: 'create' }))} disabled={editing?.kind === 'create'}>
          New key
        </button>
      }
    >
      <Notice>{notice}</Notice>
      {editing && (
        <KeyEditor
          key={editing.kind === 'edit' ? editing.key.id : 'create'}
          editing={editing}
          onCancel={() => setEditing(null)}
          onCreated={(created) => {
            done(null);
            setSecret({ title: 'Key created', name: created.data.name, secret: created.key });
          }}
          onSaved={(message) => done(message)}
        />
      )}
      <Card title="All keys">
        <LoadState loaded={keys} what="keys" empty="No keys yet. Create one with “New key”.">
          {(data) => (
            <KeysTable
              keys={data}
              ownKeyId={session.keyId}
              onEdit={(key) => (setNotice(null), setEditing({ kind: 'edit', key, initial: keyFormOf(key, new Date()) }))}
              onRotate={(key) => (setNotice(null), setRotating(key))}
              onRevoked={(key) => done(`Revoked ${key.name || key.id}. Its secret no longer works.`)}
            />
          )}
        </LoadState>
      </Card>
      {rotating && (
        <RotateDialog
          keyRecord={rotating}
          onClose={() => setRotating(null)}
          onRotated={(rotated) => {
            setRotating(null);
            keys.reload();
            setSecret({ title: 'Key rotated', name: rotated.data.name, secret: rotated.key });
          }}
        />
      )}
      {secret && <SecretDialog {...secret} onClose={() => setSecret(null)} />}
    </Page>
  );
}

/** The date of a time, the full time on hover: the table has no room for more. */
function Day({ value }: { value: string }) {
  return (
    <time dateTime={value} title={when(value)}>
      {when(value).slice(0, 10)}
    </time>
  );
}

function KeysTable({
  keys,
  ownKeyId,
  onEdit,
  onRotate,
  onRevoked,
}: {
  keys: KeyRecord[];
  ownKeyId: string;
  onEdit: (key: KeyRecord) => void;
  onRotate: (key: KeyRecord) => void;
  onRevoked: (key: KeyRecord) => void;
}) {
  const now = new Date();
  return (
    <div className="keys-table">
      <Table label="Keys">
        <thead>
          <tr>
            <th scope="col">Name and hint</th>
            <th scope="col">Scope, environment</th>
            <th scope="col" className="num">
              This month
            </th>
            <th scope="col">Limit</th>
            <th scope="col">Created, expires</th>
            <th scope="col">Status</th>
            <th scope="col">Actions</th>
          </tr>
        </thead>
        <tbody>
          {keys.map((key) => {
            const status = keyStatus(key, now);
            const label = key.name || key.id;
            return (
              <tr key={key.id}>
                <th scope="row">
                  {key.name || <span className="muted">(no name)</span>}
                  <div className="mono small key-hint">{key.hint}</div>
                  {key.project && <div className="muted small">project {key.project}</div>}
                  {key.id === ownKeyId && <div className="muted small">this console’s key</div>}
                </th>
                <td data-label="Scope, environment">
                  {key.scope.replace('_', '-')}
                  <div className="muted small">{key.environment}</div>
                </td>
                <td className="num" data-label="This month">
                  {usd(key.usage_monthly)}
                </td>
                <td data-label="Limit">
                  <Limit keyRecord={key} />
                </td>
                <td className="nowrap" data-label="Created, expires">
                  <Day value={key.created_at} />
                  <div className="small">
                    {key.expires_at ? (
                      <>
                        expires <Day value={key.expires_at} />
                      </>
                    ) : (
                      <span className="muted">never expires</span>
                    )}
                  </div>
                </td>
                <td data-label="Status">
                  <span className={`badge ${status === 'active' ? 'ok' : status === 'expired' ? 'warn' : 'bad'}`}>{status}</span>
                </td>
                <td data-label="Actions">
                  {status !== 'revoked' && (
                    <div className="key-actions">
                      <button type="button" className="secondary" onClick={() => onEdit(key)} aria-label={`Edit ${label}`}>
                        Edit
                      </button>
                      <button type="button" className="secondary" onClick={() => onRotate(key)} aria-label={`Rotate ${label}`}>
                        Rotate
                      </button>
                      <ConfirmButton
                        label="Revoke"
                        title={`Revoke ${label}?`}
                        confirmLabel="Revoke key"
                        message={
                          <>
                            <p>Every request with this key’s secret will be refused from now on. A revoked key cannot be restored.</p>
                            {key.id === ownKeyId && <p className="error">This is the key this console is signed in with: you will be signed out.</p>}
                          </>
                        }
                        onConfirm={async () => {
                          await api('DELETE', `/keys/${encodeURIComponent(key.id)}`);
                          onRevoked(key);
                        }}
                      />
                    </div>
                  )}
                </td>
              </tr>
            );
          })}
        </tbody>
      </Table>
    </div>
  );
}

/** The spend limit, what is left of it in this period, and when the period ends. */
function Limit({ keyRecord }: { keyRecord: KeyRecord }) {
  const share = usedShare(keyRecord.limit, keyRecord.limit_remaining);
  if (keyRecord.limit === null || share === null) return <span className="muted">no limit</span>;
  return (
    <div className="key-limit">
      <span>
        {usd(keyRecord.limit)} {periodName(keyRecord.limit_reset)}
      </span>
      <meter className="gauge" min={0} max={1} low={0.75} high={0.9} optimum={0} value={share} aria-label={`${Math.round(share * 100)}% of the limit used`} />
      <span className="small">{usd(keyRecord.limit_remaining)} left</span>
      {keyRecord.limit_resets_at && (
        <span className="muted small">
          resets <Day value={keyRecord.limit_resets_at} />
        </span>
      )}
    </div>
  );
}

/** The create form, or the edit form of one key: every field of spec 4.19. */
function KeyEditor({
  editing,
  onCancel,
  onCreated,
  onSaved,
}: {
  editing: Editing;
  onCancel: () => void;
  onCreated: (created: WithSecret) => void;
  onSaved: (message: string) => void;
}) {
  const [values, setValues] = useState<KeyFormValues>(() => (editing.kind === 'edit' ? editing.initial : emptyKeyForm()));
  const { busy, error, setError, run } = useAction();
  const withStepUp = useStepUp();
  const set = <F extends keyof KeyFormValues>(field: F, value: KeyFormValues[F]) => setValues((v) => ({ ...v, [field]: value }));

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    if (editing.kind === 'create') {
      const checked = createKeyBody(values);
      if (!checked.body) return setError(problemOf(checked));
      const body = checked.body;
      const created = await run(() => withStepUp(createAction(body), (headers) => api<WithSecret>('POST', '/keys', { body, headers })));
      if (created) onCreated(created);
      return;
    }
    const checked = updateKeyBody(editing.initial, values);
    if (!checked.body) return setError(problemOf(checked));
    const body = checked.body;
    const name = editing.key.name || editing.key.id;
    if (Object.keys(body).length === 0) return onSaved(`Nothing changed on ${name}.`);
    const path = `/keys/${encodeURIComponent(editing.key.id)}`;
    const action = updateAction(body);
    const saved = await run(() => (action ? withStepUp(action, (headers) => api('PATCH', path, { body, headers })) : api('PATCH', path, { body })));
    if (saved) onSaved(`Saved ${name}.`);
  };

  const title = editing.kind === 'create' ? 'New key' : `Edit ${editing.key.name || editing.key.id}`;
  const field = (name: keyof KeyFormValues, label: string, control: ReactNode, hint?: ReactNode) => (
    <div className="field">
      <label htmlFor={`key-${name}`}>{label}</label>
      {control}
      {hint && (
        <p className="hint" id={`key-${name}-hint`}>
          {hint}
        </p>
      )}
      <FieldError error={error} field={name} />
    </div>
  );
  /** The props every control shares: its id, its value, and what describes it. */
  const bind = (name: keyof KeyFormValues, hint = false) => ({
    id: `key-${name}`,
    name,
    value: values[name],
    'aria-invalid': isAbout(error, name) || undefined,
    'aria-describedby': describedBy(error, name, hint ? `key-${name}-hint` : undefined),
  });
  const text = (name: keyof KeyFormValues, extra: Record<string, unknown> = {}, hint = false) => (
    <input type="text" autoComplete="off" spellCheck={false} {...bind(name, hint)} onChange={(e) => set(name, e.target.value)} {...extra} />
  );
  const list = (name: 'allowed_models' | 'allowed_ips' | 'allowed_referrers', placeholder: string) => (
    <textarea rows={2} spellCheck={false} placeholder={placeholder} {...bind(name, true)} onChange={(e) => set(name, e.target.value)} />
  );

  return (
    <Card title={title}>
      <form onSubmit={submit} noValidate aria-label={title}>
        <div className="key-form">
          <fieldset>
            <legend>Key</legend>
            {field('name', 'Name', text('name', { autoFocus: true, maxLength: 200 }))}
            {field('project', 'Project', text('project', { maxLength: 200 }, true), 'Optional, to group keys.')}
            {field(
              'environment',
              'Environment',
              <select {...bind('environment', editing.kind === 'edit')} onChange={(e) => set('environment', e.target.value as KeyFormValues['environment'])}>
                <option value="live">live</option>
                <option value="test">test</option>
              </select>,
              editing.kind === 'edit' ? 'The secret keeps its prefix until the key is rotated.' : undefined,
            )}
            {field(
              'scope',
              'Scope',
              <select {...bind('scope', true)} onChange={(e) => set('scope', e.target.value as KeyFormValues['scope'])}>
                <option value="full">full: calls models and reads</option>
                <option value="read_only">read-only: reads only</option>
                <option value="management">management: manages keys and settings</option>
              </select>,
              values.scope === 'management'
                ? 'A management key cannot call models. Granting this scope may ask for an emailed code.'
                : 'Management keys cannot call models.',
            )}
            {field(
              'expires_in_days',
              'Expires in (days)',
              text('expires_in_days', { inputMode: 'numeric' }, true),
              editing.kind === 'edit' && editing.key.expires_at
                ? `Now expires ${when(editing.key.expires_at)}. Change the days to move it, empty it for a key that never expires.`
                : 'Empty: never expires. 1 to 3650.',
            )}
          </fieldset>
          <fieldset>
            <legend>Spend and rate limits</legend>
            {field(
              'limit',
              'Spend limit (USD)',
              text('limit', { inputMode: 'decimal', placeholder: 'no limit' }, true),
              'Empty: no limit. Requests are refused once the period’s spend reaches it.',
            )}
            {field(
              'limit_reset',
              'Limit resets',
              <select {...bind('limit_reset', true)} onChange={(e) => set('limit_reset', e.target.value as KeyFormValues['limit_reset'])}>
                <option value="daily">daily</option>
                <option value="weekly">weekly</option>
                <option value="monthly">monthly</option>
                <option value="never">never: a lifetime budget</option>
              </select>,
              'Periods start at 00:00 UTC, weeks on Monday.',
            )}
            {field(
              'rpm_limit',
              'Requests per minute',
              text('rpm_limit', { inputMode: 'numeric', placeholder: 'default' }, true),
              'Empty: the default. It can only be lowered.',
            )}
            {field(
              'tpm_limit',
              'Tokens per minute',
              text('tpm_limit', { inputMode: 'numeric', placeholder: 'default' }, true),
              'Empty: the default. It can only be lowered.',
            )}
          </fieldset>
          <fieldset>
            <legend>Restrictions</legend>
            {field('allowed_models', 'Allowed models', list('allowed_models', 'sim/echo'), 'One a line or comma-separated. Empty: every model.')}
            {field('allowed_ips', 'Allowed IPs', list('allowed_ips', '203.0.113.7, 10.0.0.0/8'), 'IPv4, IPv6 or CIDR ranges. Empty: any address.')}
            {field(
              'allowed_referrers',
              'Allowed referrers',
              list('allowed_referrers', 'example.com, *.example.com'),
              'Checked against Origin, else Referer. Empty: any.',
            )}
          </fieldset>
        </div>
        <FormError error={error} fields={KEY_FIELDS} />
        <div className="form-actions">
          <button type="submit" disabled={busy}>
            {busy ? 'Saving…' : editing.kind === 'create' ? 'Create key' : 'Save changes'}
          </button>
          <button type="button" className="secondary" onClick={onCancel} disabled={busy}>
            Cancel
          </button>
        </div>
      </form>
    </Card>
  );
}

function RotateDialog({ keyRecord, onClose, onRotated }: { keyRecord: KeyRecord; onClose: () => void; onRotated: (rotated: WithSecret) => void }) {
  const [grace, setGrace] = useState(0);
  const { busy, error, run } = useAction();
  const withStepUp = useStepUp();
  const rotate = async (e: FormEvent) => {
    e.preventDefault();
    const path = `/keys/${encodeURIComponent(keyRecord.id)}/rotate`;
    const rotated = await run(() => withStepUp('rotate_key', (headers) => api<WithSecret>('POST', path, { body: { grace_period_seconds: grace }, headers })));
    if (rotated) onRotated(rotated);
  };
  return (
    <Dialog open title={`Rotate ${keyRecord.name || keyRecord.id}`} onClose={onClose}>
      <form onSubmit={rotate}>
        <div className="dialog-body">
          <p>The key gets a new secret, shown once. Its settings, limits and usage stay.</p>
          <fieldset>
            <legend>The old secret keeps working for</legend>
            {GRACE_PERIODS.map((period) => (
              <label key={period.seconds} className="key-grace">
                <input
                  type="radio"
                  name="grace_period_seconds"
                  value={period.seconds}
                  checked={grace === period.seconds}
                  onChange={() => setGrace(period.seconds)}
                />
                {period.label}
              </label>
            ))}
          </fieldset>
          <FieldError error={error} field="grace_period_seconds" />
          <FormError error={error} fields={['grace_period_seconds']} />
        </div>
        <div className="dialog-actions">
          <button type="button" className="secondary" onClick={onClose} disabled={busy}>
            Cancel
          </button>
          <button type="submit" disabled={busy}>
            {busy ? 'Rotating…' : 'Rotate key'}
          </button>
        </div>
      </form>
    </Dialog>
  );
}

/** The secret, once: it lives only in this dialog's state and is gone when the dialog closes. */
function SecretDialog({ title, name, secret, onClose }: { title: string; name: string | null; secret: string; onClose: () => void }) {
  return (
    <Dialog open title={title} onClose={onClose}>
      <div className="dialog-body">
        <p>
          Copy the secret of <strong>{name || 'the key'}</strong> now and keep it somewhere safe. <strong>It will not be shown again</strong>: the console and
          the gateway keep only its hint.
        </p>
        <label htmlFor="key-secret">Secret</label>
        <textarea id="key-secret" className="key-secret mono" readOnly rows={2} value={secret} spellCheck={false} onFocus={(e) => e.currentTarget.select()} />
      </div>
      <div className="dialog-actions">
        <CopyButton text={secret} label="Copy secret" />
        <button type="button" onClick={onClose}>
          Done
        </button>
      </div>
    </Dialog>
  );
}
