import { useRef, useState, type FormEvent, type RefObject } from 'react';
import { api, ApiFailure, type Session } from '../api';
import { when } from '../format';
import type { ProviderKeyList } from '../records';
import { useStepUp } from '../stepup';
import { Card, ConfirmButton, FieldError, FormError, isAbout, LoadState, Notice, Page, Table, useAction, useLoad } from '../ui';
import { providerKeyBody, providerRows, type ProviderRow } from './providerKeys';
import './ProviderKeys.css';

const FIELDS = ['provider', 'api_key'];
const keyPath = (provider: string) => `/provider-keys/${encodeURIComponent(provider)}`;

export function ProviderKeys(_: { session: Session }) {
  const list = useLoad(() => api<ProviderKeyList>('GET', '/provider-keys'), []);
  const [provider, setProvider] = useState('');
  const [notice, setNotice] = useState<string | null>(null);
  const keyInput = useRef<HTMLInputElement>(null);
  const rows = list.data && providerRows(list.data);

  /** A row's "Add key" or "Replace key": the form below, set to that provider, ready to paste. */
  const choose = (name: string) => {
    setNotice(null);
    setProvider(name);
    keyInput.current?.focus();
  };

  return (
    <Page
      title="Provider keys"
      intro="Bring your own key: requests for a provider’s models then run on your own account with that provider, and are billed only a small fee here instead of their full price."
    >
      <Notice>{notice}</Notice>
      <Card title="Providers">
        <LoadState loaded={{ ...list, data: rows }} what="provider keys" empty="The gateway’s catalog has no provider a key can be saved for.">
          {(data) => (
            <ProvidersTable
              rows={data}
              onChoose={choose}
              onDeleted={(name) => {
                setNotice(`Deleted the ${name} key. Requests for ${name}’s models run on the gateway’s key again, at the full price.`);
                if (provider === name) setProvider('');
                list.reload();
              }}
            />
          )}
        </LoadState>
      </Card>
      <Card title="Add or replace a key">
        <ProviderKeyForm
          rows={rows ?? []}
          provider={provider}
          onProvider={setProvider}
          keyInput={keyInput}
          onSaved={(saved, replaced) => {
            setNotice(
              `${replaced ? 'Replaced' : 'Saved'} the ${saved.provider} key (${saved.hint}). Requests for ${saved.provider}’s models now run on your ${saved.provider} account.`,
            );
            setProvider('');
            list.reload();
          }}
        />
      </Card>
    </Page>
  );
}

function ProvidersTable({ rows, onChoose, onDeleted }: { rows: ProviderRow[]; onChoose: (provider: string) => void; onDeleted: (provider: string) => void }) {
  const saved = rows.filter((r) => r.saved).length;
  return (
    <>
      <p className="muted small">
        {saved === 0 ? 'No key saved: every request runs on the gateway’s keys.' : `${saved} of ${rows.length} providers run on your own key.`}
      </p>
      <div className="provider-table">
        <Table label="Providers and their keys">
          <thead>
            <tr>
              <th scope="col">Provider</th>
              <th scope="col">Your key</th>
              <th scope="col">Saved</th>
              <th scope="col">
                <span className="sr-only">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {rows.map((row) => (
              <tr key={row.provider}>
                <th scope="row" className="mono nowrap">
                  {row.provider}
                  {!row.inCatalog && <div className="badge warn">no longer in the catalog</div>}
                </th>
                <td className={row.saved ? 'mono nowrap' : 'muted provider-none'}>{row.saved ? row.saved.hint : 'none: the gateway’s key is used'}</td>
                <td className="nowrap">{row.saved ? when(row.saved.saved_at) : <span className="muted">—</span>}</td>
                <td>
                  <div className="provider-actions">
                    {row.inCatalog && (
                      <button
                        type="button"
                        className="secondary"
                        onClick={() => onChoose(row.provider)}
                        aria-label={row.saved ? `Replace the ${row.provider} key` : `Add a key for ${row.provider}`}
                      >
                        {row.saved ? 'Replace key' : 'Add key'}
                      </button>
                    )}
                    {row.saved && (
                      <ConfirmButton
                        label="Delete"
                        title={`Delete the ${row.provider} key?`}
                        confirmLabel="Delete key"
                        message={
                          <>
                            <p>
                              Requests for {row.provider}’s models will run on the gateway’s key again, billed at their full price. The gateway forgets the key
                              ({row.saved.hint}).
                            </p>
                            <p className="muted">The key still works at {row.provider}: revoke it there if it may have leaked.</p>
                          </>
                        }
                        onConfirm={async () => {
                          await api('DELETE', keyPath(row.provider));
                          onDeleted(row.provider);
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
    </>
  );
}

/**
 * The key is read from the input only when it is sent, and the input is emptied then: it never
 * sits in the page's state or in an attribute of the page's HTML.
 */
function ProviderKeyForm({
  rows,
  provider,
  onProvider,
  keyInput,
  onSaved,
}: {
  rows: ProviderRow[];
  provider: string;
  onProvider: (provider: string) => void;
  keyInput: RefObject<HTMLInputElement | null>;
  onSaved: (saved: { provider: string; hint: string }, replaced: boolean) => void;
}) {
  const withStepUp = useStepUp();
  const { busy, error, setError, run } = useAction();
  const choices = rows.filter((r) => r.inCatalog);
  const current = rows.find((r) => r.provider === provider)?.saved ?? null;

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const checked = providerKeyBody(provider, keyInput.current?.value ?? '');
    if ('problem' in checked) return setError(checked.problem);
    const answer = await run(() =>
      withStepUp('save_provider_key', (headers) =>
        api<{ data: { provider: string; hint: string } }>('PUT', keyPath(provider), { body: checked.body, headers }),
      ),
    );
    if (!answer) return;
    if (keyInput.current) keyInput.current.value = '';
    onSaved(answer.data, current !== null);
  };

  const unavailable = error instanceof ApiFailure && error.code === 'byok_unavailable';
  const providerInvalid = isAbout(error, 'provider');
  const keyInvalid = isAbout(error, 'api_key');
  return (
    <form onSubmit={submit} noValidate aria-label="Add or replace a provider key">
      <div className="inline provider-key-form">
        <div className="field">
          <label htmlFor="provider-key-provider">Provider</label>
          <select
            id="provider-key-provider"
            value={provider}
            onChange={(e) => (setError(null), onProvider(e.target.value))}
            aria-invalid={providerInvalid ? true : undefined}
            aria-describedby={providerInvalid ? 'provider-error' : undefined}
          >
            <option value="">Choose a provider…</option>
            {choices.map((r) => (
              <option key={r.provider} value={r.provider}>
                {r.saved ? `${r.provider} (replaces ${r.saved.hint})` : r.provider}
              </option>
            ))}
          </select>
          <FieldError error={error} field="provider" />
        </div>
        <div className="field">
          <label htmlFor="provider-key-api-key">API key</label>
          <input
            id="provider-key-api-key"
            ref={keyInput}
            type="password"
            autoComplete="off"
            spellCheck={false}
            placeholder={provider ? `Your ${provider} API key` : 'Paste the provider’s API key'}
            aria-invalid={keyInvalid ? true : undefined}
            aria-describedby={keyInvalid ? 'api_key-error' : 'provider-key-hint'}
          />
          <p className="hint" id="provider-key-hint">
            Stored sealed; only its last four characters are ever shown again.
          </p>
          <FieldError error={error} field="api_key" />
        </div>
      </div>
      {unavailable ? (
        <div className="notice provider-unavailable" role="alert">
          <strong>Provider keys cannot be saved on this gateway.</strong> Its operator has not given it the encryption key they are stored under, so requests
          keep running on the gateway’s keys. Deleting a saved key still works. <span className="muted">{error.message}</span>
        </div>
      ) : (
        <FormError error={error} fields={FIELDS} />
      )}
      <div className="form-actions">
        <button type="submit" disabled={busy}>
          {busy ? 'Saving…' : 'Save key'}
        </button>
        {current && <span className="hint">The saved key ({current.hint}) stops being used once the new one is saved.</span>}
      </div>
    </form>
  );
}
