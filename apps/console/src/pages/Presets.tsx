import { useRef, useState, type FormEvent } from 'react';
import { api, ApiFailure } from '../api';
import { when } from '../format';
import { keyRef, type KeyNames } from '../keyNames';
import type { Preset, PresetDetail, PresetVersion } from '../records';
import {
  Card,
  ConfirmButton,
  describedBy,
  ErrorText,
  FieldError,
  FormError,
  isAbout,
  Loading,
  LoadState,
  Notice,
  Page,
  Table,
  useAction,
  useHash,
  useLoad,
} from '../ui';
import { comparison, configDiff, parseConfig, presetBody, presetFormOf, slugOfHash, type CompareWith, type PresetFormValues } from './presetForm';
import { useKeyNames } from './useKeyNames';
import './Presets.css';

const FIELDS: (keyof PresetFormValues)[] = ['slug', 'name', 'description', 'config'];
const EXAMPLE = '{\n  "model": "sim/echo",\n  "system_prompt": "You are a helpful assistant."\n}';

/** A config the editor refused before sending: said where the API's 400 would be, without a code. */
class ConfigSyntaxError extends ApiFailure {
  constructor(message: string) {
    super(400, null, 'config', message);
  }
}

const presetPath = (slug: string) => `/presets/${encodeURIComponent(slug)}`;
const presetHash = (slug: string) => `#/presets/${encodeURIComponent(slug)}`;

export function Presets() {
  const slug = useHash(slugOfHash);
  return slug === null ? <PresetList /> : <PresetView key={slug} slug={slug} />;
}

function PresetList() {
  const presets = useLoad(() => api<{ data: Preset[] }>('GET', '/presets').then((r) => r.data), []);
  const [creating, setCreating] = useState(false);
  return (
    <Page
      title="Presets"
      intro="Named request settings of this workspace, used with model “@preset/<slug>”. Every config change is kept as a version you can compare and roll back to."
      actions={
        <button type="button" onClick={() => setCreating(true)} disabled={creating}>
          New preset
        </button>
      }
    >
      {creating && (
        <Card title="New preset">
          <PresetEditor
            initial={{ slug: '', name: '', description: '', config: EXAMPLE }}
            onCancel={() => setCreating(false)}
            onSaved={(saved) => (location.hash = presetHash(saved.slug))}
          />
        </Card>
      )}
      <Card title="All presets">
        <LoadState loaded={presets} what="presets" empty="No presets yet. Create one with “New preset”.">
          {(data) => (
            <div className="presets-table">
              <Table label="Presets">
                <thead>
                  <tr>
                    <th scope="col">Slug</th>
                    <th scope="col">Name</th>
                    <th scope="col" className="num">
                      Latest version
                    </th>
                    <th scope="col">Updated</th>
                  </tr>
                </thead>
                <tbody>
                  {data.map((preset) => (
                    <tr key={preset.slug}>
                      <th scope="row" className="mono">
                        <a href={presetHash(preset.slug)}>{preset.slug}</a>
                      </th>
                      <td>{preset.name ?? <span className="muted">—</span>}</td>
                      <td className="num">v{preset.version}</td>
                      <td>{when(preset.updated_at)}</td>
                    </tr>
                  ))}
                </tbody>
              </Table>
            </div>
          )}
        </LoadState>
      </Card>
    </Page>
  );
}

/**
 * The create form (`initial.slug` empty) or the edit form of a preset. The config is checked as
 * JSON before sending; the API's own refusal (`config.models[1]`) is shown under the editor.
 */
function PresetEditor({ initial, onSaved, onCancel }: { initial: PresetFormValues; onSaved: (saved: PresetDetail) => void; onCancel?: () => void }) {
  const edit = initial.slug !== '';
  const [values, setValues] = useState(initial);
  const { busy, error, setError, run } = useAction();
  const editor = useRef<HTMLTextAreaElement>(null);
  const set = (field: keyof PresetFormValues, value: string) => setValues((v) => ({ ...v, [field]: value }));

  const changeConfig = (text: string) => {
    set('config', text);
    // Once a syntax error is shown, it follows the typing, so its fix is seen at once.
    if (error instanceof ConfigSyntaxError) {
      const parsed = parseConfig(text);
      setError(parsed.ok ? null : new ConfigSyntaxError(parsed.message));
    }
  };

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const checked = presetBody(values, edit);
    if (!checked.body) {
      setError(new ConfigSyntaxError(checked.problem.message));
      const offset = checked.problem.offset;
      if (offset !== undefined && editor.current) {
        editor.current.focus();
        editor.current.setSelectionRange(offset, offset);
      }
      return;
    }
    const body = checked.body;
    const saved = await run(() =>
      edit ? api<{ data: PresetDetail }>('PATCH', presetPath(initial.slug), { body }) : api<{ data: PresetDetail }>('POST', '/presets', { body }),
    );
    if (saved) onSaved(saved.data);
  };

  const described = (field: keyof PresetFormValues, hint: boolean) => describedBy(error, field, hint ? `preset-${field}-hint` : undefined);
  const input = (field: 'slug' | 'name' | 'description', label: string, hint?: string) => (
    <div className="field">
      <label htmlFor={`preset-${field}`}>{label}</label>
      <input
        id={`preset-${field}`}
        name={field}
        type="text"
        autoComplete="off"
        spellCheck={field !== 'slug'}
        value={values[field]}
        onChange={(e) => set(field, e.target.value)}
        aria-invalid={isAbout(error, field) || undefined}
        aria-describedby={described(field, hint !== undefined)}
        autoFocus={field === 'slug'}
      />
      {hint && (
        <p className="hint" id={`preset-${field}-hint`}>
          {hint}
        </p>
      )}
      <FieldError error={error} field={field} />
    </div>
  );

  return (
    <form onSubmit={submit} noValidate aria-label={edit ? `Edit ${initial.slug}` : 'New preset'}>
      <div className="preset-form">
        <div>
          {!edit && input('slug', 'Slug', 'Lower-case letters, digits and hyphens; used as @preset/<slug>. It cannot be changed later.')}
          {input('name', 'Name')}
          {input('description', 'Description')}
        </div>
        <div className="field">
          <label htmlFor="preset-config">Config (JSON)</label>
          <textarea
            ref={editor}
            id="preset-config"
            name="config"
            className="preset-config"
            rows={12}
            spellCheck={false}
            autoCapitalize="off"
            autoCorrect="off"
            value={values.config}
            onChange={(e) => changeConfig(e.target.value)}
            aria-invalid={isAbout(error, 'config') || undefined}
            aria-describedby={described('config', true)}
          />
          <p className="hint" id="preset-config-hint">
            Any of model, models (up to 2 fallbacks), system_prompt, params, provider, reasoning, plugins, tools, cache.
            {edit && ' A changed config is saved as a new version.'}
          </p>
          <FieldError error={error} field="config" />
        </div>
      </div>
      <FormError error={error} fields={FIELDS} />
      <div className="form-actions">
        <button type="submit" disabled={busy}>
          {busy ? 'Saving…' : edit ? 'Save changes' : 'Create preset'}
        </button>
        {onCancel && (
          <button type="button" className="secondary" onClick={onCancel} disabled={busy}>
            Cancel
          </button>
        )}
      </div>
    </form>
  );
}

function PresetView({ slug }: { slug: string }) {
  const preset = useLoad(() => api<{ data: PresetDetail }>('GET', presetPath(slug)).then((r) => r.data), [slug]);
  const [notice, setNotice] = useState<string | null>(null);
  /** The version the diff shows; null follows the latest. */
  const [chosen, setChosen] = useState<number | null>(null);
  const diff = useRef<HTMLDivElement>(null);
  const detail = preset.data;

  const back = (
    <p>
      <a href="#/presets">← All presets</a>
    </p>
  );
  if (!detail) {
    return (
      <Page title={`Preset ${slug}`}>
        {back}
        {preset.loading ? <Loading what="the preset" /> : <ErrorText error={preset.error} />}
      </Page>
    );
  }

  const saved = (message: string) => {
    setNotice(message);
    setChosen(null);
    preset.reload();
  };

  return (
    <Page
      title={`Preset ${detail.slug}`}
      intro={detail.description ?? undefined}
      actions={
        <ConfirmButton
          label="Delete preset"
          title={`Delete ${detail.slug}?`}
          confirmLabel="Delete preset"
          message={
            <p>
              Requests naming @preset/{detail.slug} will be refused, and its {detail.versions.length} versions are deleted. A preset made again with this slug
              starts from version 1.
            </p>
          }
          onConfirm={async () => {
            await api('DELETE', presetPath(detail.slug));
            location.hash = '#/presets';
          }}
        />
      }
    >
      {back}
      <Notice>{notice}</Notice>
      <Card title={`Latest: version ${detail.version}`}>
        <PresetEditor
          key={`${detail.version}-${detail.updated_at}`}
          initial={presetFormOf(detail)}
          onSaved={(next) =>
            saved(next.version > detail.version ? `Saved as version ${next.version}.` : 'Saved. The config did not change, so no version was added.')
          }
        />
      </Card>
      <Card title="Version history">
        <VersionTable
          detail={detail}
          chosen={chosen ?? detail.version}
          onCompare={(version) => {
            setChosen(version);
            // On a phone the diff is screens away from the button that chose it.
            diff.current?.scrollIntoView({ block: 'nearest' });
          }}
          onRolledBack={(next, version) => saved(`Rolled back: version ${next.version} has version ${version}’s config.`)}
        />
      </Card>
      <div ref={diff}>
        <Card title="Compare versions">
          <VersionDiff versions={detail.versions} chosen={chosen ?? detail.version} onChoose={setChosen} />
        </Card>
      </div>
    </Page>
  );
}

function VersionTable({
  detail,
  chosen,
  onCompare,
  onRolledBack,
}: {
  detail: PresetDetail;
  chosen: number;
  onCompare: (version: number) => void;
  onRolledBack: (next: PresetDetail, version: number) => void;
}) {
  const names = useKeyNames();
  return (
    <div className="presets-table">
      <Table label="Versions">
        <thead>
          <tr>
            <th scope="col">Version</th>
            <th scope="col">Created</th>
            <th scope="col">By</th>
            <th scope="col">Note</th>
            <th scope="col">Actions</th>
          </tr>
        </thead>
        <tbody>
          {[...detail.versions].reverse().map((v) => (
            <tr key={v.version} aria-current={v.version === chosen ? 'true' : undefined}>
              <th scope="row">Version {v.version}</th>
              <td className="nowrap">{when(v.created_at)}</td>
              <td className="small">
                <CreatedBy by={v.created_by} names={names} />
              </td>
              <td>
                {v.version === detail.version && <span className="badge ok">latest</span>}{' '}
                {v.rolled_back_to !== null && <span className="muted">rolled back to v{v.rolled_back_to}</span>}
              </td>
              <td>
                <div className="preset-version-actions">
                  <button
                    type="button"
                    className="secondary"
                    onClick={() => onCompare(v.version)}
                    aria-label={`Show changes of version ${v.version}`}
                    aria-pressed={v.version === chosen}
                  >
                    Show changes
                  </button>
                  {v.version !== detail.version && (
                    <ConfirmButton
                      label="Roll back"
                      title={`Roll back to version ${v.version}?`}
                      confirmLabel={`Roll back to version ${v.version}`}
                      message={
                        <>
                          <p>
                            Version {v.version}’s config becomes the latest again, as version {detail.version + 1}. Requests using this preset get it at once.
                          </p>
                          <DiffLines from={detail.versions.at(-1)!} to={v} />
                        </>
                      }
                      onConfirm={async () => {
                        const { data } = await api<{ data: PresetDetail }>('POST', `${presetPath(detail.slug)}/rollback`, { body: { version: v.version } });
                        onRolledBack(data, v.version);
                      }}
                    />
                  )}
                </div>
              </td>
            </tr>
          ))}
        </tbody>
      </Table>
    </div>
  );
}

function VersionDiff({ versions, chosen, onChoose }: { versions: PresetVersion[]; chosen: number; onChoose: (version: number) => void }) {
  const [against, setAgainst] = useState<CompareWith>('previous');
  const pair = comparison(versions, chosen, against);
  return (
    <>
      <div className="inline">
        <div className="field">
          <label htmlFor="diff-version">Version</label>
          <select id="diff-version" value={chosen} onChange={(e) => onChoose(Number(e.target.value))}>
            {[...versions].reverse().map((v) => (
              <option key={v.version} value={v.version}>
                Version {v.version}
              </option>
            ))}
          </select>
        </div>
        <div className="field">
          <label htmlFor="diff-against">Compared with</label>
          <select id="diff-against" value={against} onChange={(e) => setAgainst(e.target.value as CompareWith)}>
            <option value="previous">the version before it</option>
            <option value="latest">the latest version</option>
          </select>
        </div>
      </div>
      {pair && <DiffLines from={pair.from} to={pair.to} />}
    </>
  );
}

/** The config's lines from one version to another: added green with +, removed red with -. */
function DiffLines({ from, to }: { from: PresetVersion | null; to: PresetVersion }) {
  const lines = configDiff(from?.config ?? null, to.config);
  const added = lines.filter((l) => l.kind === 'added').length;
  const removed = lines.filter((l) => l.kind === 'removed').length;
  const what = from ? `Version ${from.version} → version ${to.version}` : `Version ${to.version}, the first`;
  return (
    <figure className="preset-diff">
      <figcaption className="small">
        {what}:{' '}
        {from?.version === to.version || (added === 0 && removed === 0) ? 'no changes' : `${added} line${added === 1 ? '' : 's'} added, ${removed} removed`}
      </figcaption>
      <pre className="code-block" aria-label={`Changes, ${what}`} tabIndex={0}>
        {lines.map((line, i) => {
          const Tag = line.kind === 'added' ? 'ins' : line.kind === 'removed' ? 'del' : 'span';
          return (
            <Tag key={i} className={`preset-diff-line preset-diff-${line.kind}`}>
              <span className="preset-diff-sign" aria-hidden={line.kind === 'same' || undefined}>
                {line.sign}
              </span>
              {line.text}
              {'\n'}
            </Tag>
          );
        })}
      </pre>
    </figure>
  );
}

/** Who saved a version: the key by its name (its id under it), else what the API recorded. */
function CreatedBy({ by, names }: { by: string | null; names: KeyNames }) {
  const key = keyRef(by, names);
  if (key?.name) {
    return (
      <>
        <span>{key.name}</span>
        <div className="muted mono">{key.id}</div>
      </>
    );
  }
  return <span className="mono">{by ?? '—'}</span>;
}
