import { useState, type FormEvent } from 'react';
import { api, type Session } from '../api';
import { when } from '../format';
import type { PromptLog, PromptLoggingSetting, PromptLogSummary, Settings } from '../records';
import { Card, ConfirmButton, DetailCard, ErrorText, FieldError, FormError, isAbout, Loading, LoadState, Notice, Page, Table, useAction, useLoad } from '../ui';
import { CursorItems } from './CursorItems';
import { withoutItem } from './cursorList';
import { printedSegments, modelOf, promptLoggingBody, promptLoggingFormOf, RETENTION_DAYS, type PromptLoggingForm } from './promptLogs';
import { useCursorList, type CursorList } from './useCursorList';
import { useSetting } from './useSetting';
import './PromptLogs.css';

const DAYS_FIELD = 'prompt_logging.retention_days';

export function PromptLogs(_: { session: Session }) {
  const { settings, setting, setSetting } = useSetting('prompt_logging');
  const [selected, setSelected] = useState<string | null>(null);
  const [purged, setPurged] = useState<string | null>(null);
  const logs = useCursorList<PromptLogSummary>('/prompt-logs', (l) => l.generation_id);

  return (
    <Page
      title="Prompt logs"
      intro="When logging is on, each billed request and its answer are kept encrypted for the days you choose, then deleted. Inline images and file bytes are never kept."
    >
      {setting ? (
        <SettingCard setting={setting} onSaved={setSetting} />
      ) : (
        <Card title="Logging">{settings.error ? <ErrorText error={settings.error} /> : <Loading what="the logging setting" />}</Card>
      )}
      <Notice>{purged}</Notice>
      <LogsCard
        logs={logs}
        setting={setting}
        selected={selected}
        onSelect={(id) => (setPurged(null), setSelected(id))}
        onPurgedAll={(count) => {
          setSelected(null);
          setPurged(`Purged ${count} log${count === 1 ? '' : 's'}.`);
          logs.reload();
        }}
      />
      {selected && (
        <LogCard
          key={selected}
          id={selected}
          onClose={() => setSelected(null)}
          onPurged={() => {
            logs.update((s) => withoutItem(s, selected, (l) => l.generation_id));
            setSelected(null);
            setPurged(`Purged the log of ${selected}.`);
          }}
        />
      )}
    </Page>
  );
}

function SettingCard({ setting, onSaved }: { setting: PromptLoggingSetting; onSaved: (setting: PromptLoggingSetting) => void }) {
  const [form, setForm] = useState<PromptLoggingForm>(() => promptLoggingFormOf(setting));
  const [saved, setSaved] = useState<string | null>(null);
  const { busy, error, setError, run } = useAction();

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setSaved(null);
    let body: ReturnType<typeof promptLoggingBody>;
    try {
      body = promptLoggingBody(form);
    } catch (err) {
      setError(err);
      return;
    }
    const answer = await run(() => api<{ data: Settings }>('PATCH', '/settings', { body }));
    if (!answer) return;
    const next = answer.data.prompt_logging;
    onSaved(next);
    setForm(promptLoggingFormOf(next));
    setSaved(
      next.enabled
        ? `Saved: requests from now on are kept for ${next.retention_days} day${next.retention_days === 1 ? '' : 's'}.`
        : 'Saved: logging is off. Logs already kept stay until they expire or you purge them.',
    );
  };

  const daysInvalid = isAbout(error, DAYS_FIELD);
  return (
    <Card
      title={
        <>
          Logging <span className={setting.enabled ? 'badge ok' : 'badge'}>{setting.enabled ? `On · ${setting.retention_days} days` : 'Off'}</span>
        </>
      }
    >
      <form onSubmit={submit} noValidate aria-label="Prompt logging setting">
        <div className="field">
          <label>
            <input type="checkbox" id="prompt-logging-enabled" checked={form.enabled} onChange={(e) => setForm({ ...form, enabled: e.target.checked })} />
            Keep prompt logs
          </label>
          <FieldError error={error} field="prompt_logging.enabled" />
        </div>
        <div className="field prompt-days">
          <label htmlFor="prompt-logging-days">Keep each log for (days)</label>
          <input
            id="prompt-logging-days"
            type="number"
            inputMode="numeric"
            min={RETENTION_DAYS.min}
            max={RETENTION_DAYS.max}
            step={1}
            value={form.retentionDays}
            onChange={(e) => setForm({ ...form, retentionDays: e.target.value })}
            aria-invalid={daysInvalid ? true : undefined}
            aria-describedby={daysInvalid ? `${DAYS_FIELD}-error` : 'prompt-logging-days-hint'}
          />
          <p className="hint" id="prompt-logging-days-hint">
            {RETENTION_DAYS.min} to {RETENTION_DAYS.max} days. Applies to logs kept from now on; turning logging off keeps the logs already made until they
            expire.
          </p>
          <FieldError error={error} field={DAYS_FIELD} />
        </div>
        <FormError error={error} fields={['prompt_logging.enabled', DAYS_FIELD]} />
        <Notice>{saved}</Notice>
        <div className="form-actions">
          <button type="submit" disabled={busy}>
            {busy ? 'Saving…' : 'Save logging setting'}
          </button>
        </div>
      </form>
    </Card>
  );
}

function LogsCard({
  logs,
  setting,
  selected,
  onSelect,
  onPurgedAll,
}: {
  logs: CursorList<PromptLogSummary>;
  setting: PromptLoggingSetting | undefined;
  selected: string | null;
  onSelect: (id: string) => void;
  onPurgedAll: (count: number) => void;
}) {
  return (
    <Card
      title="Logs"
      actions={
        <div className="page-actions">
          <button type="button" className="secondary" onClick={logs.reload} disabled={logs.loading}>
            Refresh
          </button>
          <ConfirmButton
            label="Purge all logs"
            title="Purge every prompt log?"
            message={<p>Every log of this account is deleted for good, now. Logging stays as it is set.</p>}
            confirmLabel="Purge all logs"
            disabled={logs.items.length === 0}
            onConfirm={async () => onPurgedAll((await api<{ deleted: number }>('DELETE', '/prompt-logs')).deleted)}
          />
        </div>
      }
    >
      <CursorItems
        list={logs}
        what="prompt logs"
        empty={
          setting?.enabled
            ? `No logs yet. Each billed request from now on is kept here for ${setting.retention_days} day${setting.retention_days === 1 ? '' : 's'}.`
            : 'Logging is off, so nothing is kept. Turn it on above to keep each billed request and its answer.'
        }
      >
        {(items) => (
          <Table label="Prompt logs">
            <thead>
              <tr>
                <th scope="col">Generation</th>
                <th scope="col">Endpoint</th>
                <th scope="col">Created</th>
                <th scope="col">Expires</th>
                <th scope="col">Details</th>
              </tr>
            </thead>
            <tbody>
              {items.map((l) => (
                <tr key={l.generation_id} aria-selected={l.generation_id === selected} className={l.generation_id === selected ? 'prompt-selected' : undefined}>
                  <td className="mono small prompt-nowrap">{l.generation_id}</td>
                  <td className="mono small prompt-nowrap">{l.endpoint}</td>
                  <td className="prompt-nowrap">{when(l.created_at)}</td>
                  <td className="prompt-nowrap">{when(l.expires_at)}</td>
                  <td>
                    <button type="button" className="link" onClick={() => onSelect(l.generation_id)} aria-label={`View log ${l.generation_id}`}>
                      View
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </Table>
        )}
      </CursorItems>
    </Card>
  );
}

function LogCard({ id, onClose, onPurged }: { id: string; onClose: () => void; onPurged: () => void }) {
  const log = useLoad(() => api<{ data: PromptLog }>('GET', `/prompt-logs/${encodeURIComponent(id)}`), [id]);
  return (
    <DetailCard
      titleId="log-title"
      title={
        <>
          Log <span className="mono">{id}</span>
        </>
      }
      actions={
        <ConfirmButton
          label="Purge this log"
          title="Purge this log?"
          message={
            <p>
              The request and answer of <span className="mono">{id}</span> are deleted for good, now.
            </p>
          }
          confirmLabel="Purge log"
          onConfirm={async () => {
            await api('DELETE', `/prompt-logs/${encodeURIComponent(id)}`);
            onPurged();
          }}
        />
      }
      onClose={onClose}
    >
      <LoadState loaded={{ ...log, data: log.data?.data }} what="the log">
        {(data) => (
          <>
            <dl>
              <dt>Endpoint</dt>
              <dd className="mono">{data.endpoint}</dd>
              <dt>Model</dt>
              <dd className="mono">{modelOf(data) ?? '—'}</dd>
              <dt>Key</dt>
              <dd className="mono">{data.key_id}</dd>
              <dt>Created</dt>
              <dd>{when(data.created_at)}</dd>
              <dt>Expires</dt>
              <dd>{when(data.expires_at)}</dd>
            </dl>
            <h3 id="log-request">Request</h3>
            <Printed value={data.request} labelledBy="log-request" />
            <h3 id="log-response">Answer</h3>
            <Printed value={data.response} labelledBy="log-response" />
          </>
        )}
      </LoadState>
    </DetailCard>
  );
}

const CHIP_TITLE = { image: 'An inline image: not kept in the log', binary: 'Bytes that are not text (a file, audio): not kept in the log' };

/** JSON as kept, with the server's placeholders as chips rather than look-alike text. */
function Printed({ value, labelledBy }: { value: unknown; labelledBy: string }) {
  return (
    <pre className="code-block" role="region" aria-labelledby={labelledBy} tabIndex={0}>
      {printedSegments(value).map((s, i) =>
        'text' in s ? (
          s.text
        ) : (
          <span key={i} className="prompt-chip" title={CHIP_TITLE[s.placeholder]}>
            [{s.placeholder}]
          </span>
        ),
      )}
    </pre>
  );
}
