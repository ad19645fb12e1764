import { useEffect, useRef, useState, type FormEvent } from 'react';
import { api, type Session } from '../api';
import { atSecond, when } from '../format';
import type { WebhookEndpoint, WebhookEvent, WebhookEventDetail } from '../records';
import { useStepUp } from '../stepup';
import {
  Breakable,
  Card,
  ConfirmButton,
  CopyButton,
  DetailCard,
  Empty,
  ErrorText,
  FieldError,
  FormError,
  isAbout,
  Loading,
  LoadState,
  Notice,
  Page,
  Stamp,
  Table,
  useAction,
  useLoad,
} from '../ui';
import { CursorItems } from './CursorItems';
import { replaceItem } from './cursorList';
import { useCursorList, type CursorList } from './useCursorList';
import { useSetting } from './useSetting';
import {
  attemptOutcome,
  deliveryBadge,
  EVENT_TYPES,
  lastStatus,
  pausedNotice,
  subscribedTo,
  toggleEvent,
  webhookBody,
  webhookFormOf,
  type WebhookForm,
} from './webhook';
import './Webhook.css';

/** How long to wait for the worker to make a redelivery's attempt before saying to refresh. */
const REDELIVERY_WAIT_MS = 15_000;

interface Secret {
  value: string;
  reason: 'new' | 'rotated';
}

export function Webhook(_: { session: Session }) {
  // null: no endpoint is saved; undefined: the settings have not come yet.
  const { settings, setting: endpoint, setSetting: setEndpoint } = useSetting('webhook');
  const [secret, setSecret] = useState<Secret | null>(null);
  const [selected, setSelected] = useState<string | null>(null);
  const events = useCursorList<WebhookEvent>('/webhook-events', (e) => e.id);

  return (
    <Page
      title="Webhook"
      intro="Where the gateway POSTs signed events about this account (keys, credits, limits, batches, videos, model retirements), and every delivery attempt."
    >
      {secret && <SecretCard secret={secret} onDone={() => setSecret(null)} />}
      {endpoint === undefined ? (
        settings.error ? (
          <Card title="Endpoint">
            <ErrorText error={settings.error} />
            <button type="button" className="secondary" onClick={settings.reload}>
              Try again
            </button>
          </Card>
        ) : (
          <Card title="Endpoint">
            <Loading what="the webhook endpoint" />
          </Card>
        )
      ) : (
        <EndpointCard
          endpoint={endpoint}
          onSaved={(saved, newSecret) => {
            setEndpoint(saved);
            if (newSecret) setSecret({ value: newSecret, reason: 'new' });
          }}
          onRotated={(saved, newSecret) => {
            setEndpoint(saved);
            setSecret({ value: newSecret, reason: 'rotated' });
          }}
          onDeleted={() => {
            setEndpoint(null);
            setSecret(null);
          }}
        />
      )}
      <EventsCard events={events} selected={selected} onSelect={setSelected} />
      {selected && (
        <EventDetailCard
          key={selected}
          id={selected}
          endpoint={endpoint ?? null}
          onClose={() => setSelected(null)}
          onChanged={(fresh) => events.update((s) => ({ ...s, items: replaceItem(s.items, fresh, (e) => e.id) }))}
        />
      )}
    </Page>
  );
}

/** The signing secret, shown once: after a first save or a rotation, never again. */
function SecretCard({ secret, onDone }: { secret: Secret; onDone: () => void }) {
  const heading = useRef<HTMLHeadingElement>(null);
  // It appears at the top of the page, away from the button that made it; a closing confirmation
  // dialog gives focus back to its button first, hence the next frame.
  useEffect(() => {
    const frame = requestAnimationFrame(() => {
      heading.current?.focus();
      heading.current?.scrollIntoView?.({ block: 'start' });
    });
    return () => cancelAnimationFrame(frame);
  }, [secret]);
  return (
    <section className="card webhook-secret" aria-labelledby="webhook-secret-title">
      <h2 id="webhook-secret-title" ref={heading} tabIndex={-1}>
        {secret.reason === 'new' ? 'Your signing secret' : 'Your new signing secret'}
      </h2>
      <p>
        <strong>Copy it now: it is shown this once.</strong>{' '}
        {secret.reason === 'rotated'
          ? 'The previous secret stopped signing at once; give this one to your receiver.'
          : 'Your receiver needs it to check that deliveries come from this gateway.'}
      </p>
      <div className="field">
        <label htmlFor="webhook-secret">Signing secret</label>
        <div className="webhook-secret-value">
          <input id="webhook-secret" className="mono" readOnly value={secret.value} onFocus={(e) => e.currentTarget.select()} spellCheck={false} />
          <CopyButton text={secret.value} />
        </div>
      </div>
      <VerifyHelp />
      <div className="form-actions">
        <button type="button" onClick={onDone}>
          I have stored the secret
        </button>
      </div>
    </section>
  );
}

const VERIFY_SAMPLE = `import { createHmac, timingSafeEqual } from 'node:crypto';

// header: the Svc-Signature request header; rawBody: the body exactly as received.
export function verify(header, rawBody, secret, now = Math.floor(Date.now() / 1000)) {
  const parts = Object.fromEntries(header.split(',').map((p) => p.trim().split('=', 2)));
  const t = Number(parts.t);
  if (!Number.isInteger(t) || Math.abs(now - t) > 300) return false;
  const expected = createHmac('sha256', secret).update(\`\${t}.\${rawBody}\`).digest();
  const given = Buffer.from(parts.v1 ?? '', 'hex');
  return given.length === expected.length && timingSafeEqual(given, expected);
}`;

/** docs/api/settings-webhooks.md "Delivery": how a receiver checks a delivery, as Stripe's signatures are checked. */
function VerifyHelp() {
  return (
    <div className="webhook-verify">
      <h3>Verifying a delivery</h3>
      <p>
        Each delivery is a POST of <code>{'{id, type, created, data}'}</code> with the header <code>Svc-Signature: t=&lt;unix seconds&gt;,v1=&lt;hex&gt;</code>.
        Compute the HMAC-SHA256 of <code>&lt;t&gt;.&lt;raw body&gt;</code> keyed with the whole secret (<code>whsec_</code> included), compare it with{' '}
        <code>v1</code> in constant time, and reject a <code>t</code> more than 300 seconds from your clock. A retry carries the same event <code>id</code>:
        deduplicate on it.
      </p>
      <pre className="code-block">{VERIFY_SAMPLE}</pre>
    </div>
  );
}

function EndpointCard({
  endpoint,
  onSaved,
  onRotated,
  onDeleted,
}: {
  endpoint: WebhookEndpoint | null;
  onSaved: (endpoint: WebhookEndpoint, secret: string | undefined) => void;
  onRotated: (endpoint: WebhookEndpoint, secret: string) => void;
  onDeleted: () => void;
}) {
  const resume = useAction();
  const paused = endpoint && pausedNotice(endpoint);
  return (
    <Card
      title="Endpoint"
      actions={
        endpoint && (
          <div className="page-actions">
            <ConfirmButton
              label="Rotate secret"
              title="Rotate the signing secret?"
              message={
                <p>A new secret is made and shown once. The current secret stops signing at once: your receiver rejects deliveries until it has the new one.</p>
              }
              confirmLabel="Rotate secret"
              onConfirm={async () => {
                const r = await api<{ data: WebhookEndpoint; secret: string }>('POST', '/settings/webhook/rotate-secret');
                onRotated(r.data, r.secret);
              }}
            />
            <ConfirmButton
              label="Delete endpoint"
              title="Delete the webhook endpoint?"
              message={
                <p>
                  Events stop being sent to <span className="mono">{endpoint.url}</span>. The events already recorded stay listed. Saving an endpoint again
                  makes a new signing secret.
                </p>
              }
              confirmLabel="Delete endpoint"
              onConfirm={async () => {
                await api('DELETE', '/settings/webhook');
                onDeleted();
              }}
            />
          </div>
        )
      }
    >
      {paused && (
        <div className="notice webhook-paused" role="status">
          <p>
            <strong>{paused}</strong>
          </p>
          <button
            type="button"
            onClick={() => resume.run(async () => onSaved((await api<{ data: WebhookEndpoint }>('POST', '/settings/webhook/resume')).data, undefined))}
            disabled={resume.busy}
          >
            {resume.busy ? 'Resuming…' : 'Resume deliveries'}
          </button>
          <ErrorText error={resume.error} />
        </div>
      )}
      {endpoint ? (
        <p className="muted small">
          <span className="mono">{endpoint.id}</span> · receives {subscribedTo(endpoint)} · saved {when(endpoint.updated_at)}
        </p>
      ) : (
        <p className="muted">No endpoint yet: no events are sent. Save one to receive them; its signing secret is shown once.</p>
      )}
      <EndpointForm key={endpoint ? `${endpoint.id}:${endpoint.updated_at}` : 'new'} endpoint={endpoint} onSaved={onSaved} />
    </Card>
  );
}

function EndpointForm({ endpoint, onSaved }: { endpoint: WebhookEndpoint | null; onSaved: (endpoint: WebhookEndpoint, secret: string | undefined) => void }) {
  const withStepUp = useStepUp();
  const [form, setForm] = useState<WebhookForm>(() => webhookFormOf(endpoint));
  const { busy, error, setError, run } = useAction();

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    let body: ReturnType<typeof webhookBody>;
    try {
      body = webhookBody(form);
    } catch (err) {
      setError(err);
      return;
    }
    const saved = await run(() =>
      withStepUp('save_webhook', (headers) => api<{ data: WebhookEndpoint; secret?: string }>('PUT', '/settings/webhook', { body, headers })),
    );
    if (saved) onSaved(saved.data, saved.secret);
  };

  const urlError = isAbout(error, 'url') ? 'url-error' : undefined;
  return (
    <form onSubmit={submit} noValidate aria-label={endpoint ? 'Endpoint settings' : 'New endpoint'}>
      <div className="field">
        <label htmlFor="webhook-url">Endpoint URL</label>
        <input
          id="webhook-url"
          name="url"
          type="url"
          inputMode="url"
          autoComplete="off"
          spellCheck={false}
          placeholder="https://hooks.example.com/svc-gateway"
          value={form.url}
          onChange={(e) => setForm({ ...form, url: e.target.value })}
          aria-invalid={urlError ? true : undefined}
          aria-describedby={urlError ?? 'webhook-url-hint'}
        />
        <p className="hint" id="webhook-url-hint">
          An https URL that resolves to a public address.{endpoint && ' Saving again keeps the secret, and resumes a paused endpoint.'}
        </p>
        <FieldError error={error} field="url" />
      </div>
      <fieldset className="webhook-events">
        <legend>Events</legend>
        <label className="webhook-all">
          <input type="checkbox" checked={form.allEvents} onChange={(e) => setForm({ ...form, allEvents: e.target.checked })} />
          All events, including types added later
        </label>
        {!form.allEvents && (
          <ul className="webhook-types">
            {EVENT_TYPES.map(({ type, cause }) => (
              <li key={type}>
                <input
                  id={`event-${type}`}
                  type="checkbox"
                  checked={form.events.includes(type)}
                  onChange={(e) => setForm(toggleEvent(form, type, e.target.checked))}
                />
                <label htmlFor={`event-${type}`}>
                  <span className="mono">{type}</span> <span className="muted small">{cause}</span>
                </label>
              </li>
            ))}
          </ul>
        )}
        <FieldError error={error} field="events" />
      </fieldset>
      <FormError error={error} fields={['url', 'events']} />
      <div className="form-actions">
        <button type="submit" disabled={busy}>
          {busy ? 'Saving…' : endpoint ? 'Save endpoint' : 'Create endpoint'}
        </button>
      </div>
    </form>
  );
}

function DeliveryBadge({ delivery }: { delivery: WebhookEvent['delivery'] }) {
  const { label, tone } = deliveryBadge(delivery);
  return <span className={`badge ${tone}`}>{label}</span>;
}

function EventsCard({ events, selected, onSelect }: { events: CursorList<WebhookEvent>; selected: string | null; onSelect: (id: string) => void }) {
  return (
    <Card
      title="Events"
      actions={
        <button type="button" className="secondary" onClick={events.reload} disabled={events.loading}>
          Refresh
        </button>
      }
    >
      <CursorItems
        list={events}
        what="events"
        empty="No events yet. Once an endpoint is saved, each event it receives is listed here (creating a key sends key.created, for one)."
      >
        {(items) => (
          <Table label="Webhook events">
            <thead>
              <tr>
                <th scope="col">Type</th>
                <th scope="col">Event</th>
                <th scope="col">Created</th>
                <th scope="col">Delivery</th>
                <th scope="col" className="num">
                  Attempts
                </th>
                <th scope="col">Last status</th>
                <th scope="col">Details</th>
              </tr>
            </thead>
            <tbody>
              {items.map((e) => (
                <tr key={e.id} aria-selected={e.id === selected} className={e.id === selected ? 'webhook-selected' : undefined}>
                  <td className="mono words">
                    <Breakable text={e.type} />
                  </td>
                  <td className="mono small webhook-nowrap">{e.id}</td>
                  <td>
                    <Stamp text={when(e.created)} />
                  </td>
                  <td>
                    <DeliveryBadge delivery={e.delivery} />
                  </td>
                  <td className="num">{e.delivery.attempts}</td>
                  <td className="webhook-nowrap" title={e.delivery.last_error ?? undefined}>
                    {lastStatus(e.delivery)}
                  </td>
                  <td>
                    <button type="button" className="link" onClick={() => onSelect(e.id)} aria-label={`View attempts of ${e.id}`}>
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

function EventDetailCard({
  id,
  endpoint,
  onClose,
  onChanged,
}: {
  id: string;
  endpoint: WebhookEndpoint | null;
  onClose: () => void;
  onChanged: (event: WebhookEvent) => void;
}) {
  const detail = useLoad(() => api<{ data: WebhookEventDetail }>('GET', `/webhook-events/${encodeURIComponent(id)}`), [id]);
  const [fresh, setFresh] = useState<WebhookEventDetail | null>(null);
  const [waiting, setWaiting] = useState<'attempt' | 'late' | 'paused' | null>(null);
  const redeliver = useAction();
  const event = fresh ?? detail.data?.data;

  // The worker makes the attempt after the 202: the page looks again until it is listed.
  const send = () =>
    redeliver.run(async () => {
      const before = event?.attempts.length ?? 0;
      await api('POST', `/webhook-events/${encodeURIComponent(id)}/redeliver`);
      // A paused endpoint is sent nothing until it is resumed: no attempt to wait for.
      if (endpoint?.paused) return setWaiting('paused');
      setWaiting('attempt');
      const deadline = Date.now() + REDELIVERY_WAIT_MS;
      for (;;) {
        const { data } = await api<{ data: WebhookEventDetail }>('GET', `/webhook-events/${encodeURIComponent(id)}`);
        setFresh(data);
        onChanged(data);
        if (data.attempts.length > before) return setWaiting(null);
        if (Date.now() > deadline) return setWaiting('late');
        await new Promise((resolve) => setTimeout(resolve, 750));
      }
    });

  return (
    <DetailCard
      titleId="event-detail-title"
      title={
        <>
          Event <span className="mono">{id}</span>
        </>
      }
      actions={
        <button type="button" onClick={send} disabled={redeliver.busy || !event}>
          {redeliver.busy ? 'Redelivering…' : 'Redeliver'}
        </button>
      }
      onClose={onClose}
    >
      {!endpoint && <p className="hint">There is no endpoint now: a redelivery needs one.</p>}
      {endpoint?.paused && waiting !== 'paused' && <p className="hint">The endpoint is paused: a redelivery is sent once you resume it.</p>}
      <ErrorText error={redeliver.error} />
      {waiting === 'attempt' && <Notice>Redelivery requested: waiting for its attempt…</Notice>}
      {waiting === 'paused' && <Notice>Redelivery requested: it is sent when you resume the endpoint.</Notice>}
      {waiting === 'late' && <Notice>Redelivery requested; its attempt is not listed yet. Refresh the events in a moment.</Notice>}
      <LoadState loaded={{ ...detail, data: event }} what="the event">
        {(data) => <EventDetail event={data} />}
      </LoadState>
    </DetailCard>
  );
}

function EventDetail({ event }: { event: WebhookEventDetail }) {
  return (
    <>
      <dl>
        <dt>Type</dt>
        <dd className="mono">{event.type}</dd>
        <dt>Created</dt>
        <dd>{when(event.created)}</dd>
        <dt>Delivery</dt>
        <dd>
          <DeliveryBadge delivery={event.delivery} />
          {event.delivery.next_attempt_at && event.delivery.state === 'pending' && (
            <span className="muted small"> next attempt {when(event.delivery.next_attempt_at)}</span>
          )}
        </dd>
      </dl>
      <h3>Attempts</h3>
      {event.attempts.length === 0 ? (
        <Empty>No attempt yet.</Empty>
      ) : (
        <Table label="Delivery attempts">
          <thead>
            <tr>
              <th scope="col" className="num">
                Attempt
              </th>
              <th scope="col">At</th>
              <th scope="col">Result</th>
              <th scope="col">Status</th>
              <th scope="col" className="num">
                Latency
              </th>
            </tr>
          </thead>
          <tbody>
            {event.attempts.map((a) => (
              <tr key={a.attempt}>
                <td className="num">{a.attempt}</td>
                <td className="webhook-nowrap">{atSecond(a.at)}</td>
                <td>{a.delivered ? <span className="badge ok">Delivered</span> : <span className="badge bad">Failed</span>}</td>
                <td>{attemptOutcome(a)}</td>
                <td className="num">{a.latency_ms} ms</td>
              </tr>
            ))}
          </tbody>
        </Table>
      )}
      <h3>Data</h3>
      <pre className="code-block" aria-label="Event data">
        {JSON.stringify(event.data, null, 2)}
      </pre>
    </>
  );
}
