import { useEffect, useState, type FormEvent } from 'react';
import { loadSession, onSessionEnd, signIn, signOut, type Session } from './api';
import { ROUTES, routeOf, type RoutePath } from './routes';
import { StepUpProvider } from './stepup';
import { ErrorText, Notice, useHash } from './ui';
import { Overview } from './pages/Overview';
import { Keys } from './pages/Keys';
import { Presets } from './pages/Presets';
import { Guardrails } from './pages/Guardrails';
import { Webhook } from './pages/Webhook';
import { ProviderKeys } from './pages/ProviderKeys';
import { PromptLogs } from './pages/PromptLogs';
import { Activity } from './pages/Activity';
import { AuditLog } from './pages/AuditLog';
import { Organizations } from './pages/Organizations';
import { Security } from './pages/Security';

const PAGES: Record<RoutePath, (props: { session: Session }) => React.ReactNode> = {
  overview: Overview,
  keys: Keys,
  presets: Presets,
  guardrails: Guardrails,
  webhook: Webhook,
  'provider-keys': ProviderKeys,
  'prompt-logs': PromptLogs,
  activity: Activity,
  'audit-log': AuditLog,
  organizations: Organizations,
  security: Security,
};

export function App() {
  const [session, setSession] = useState<Session | null>(() => loadSession());
  const [ended, setEnded] = useState<string | null>(null);
  const route = useHash(routeOf);

  useEffect(
    () =>
      onSessionEnd((message) => {
        setSession(null);
        setEnded(message);
      }),
    [],
  );

  useEffect(() => {
    const label = ROUTES.find((r) => r.path === route)?.label;
    document.title = session && label ? `${label} · svc-gateway console` : 'svc-gateway console';
  }, [route, session]);

  if (!session) return <SignIn notice={ended} onSignedIn={(s) => (setEnded(null), setSession(s))} />;

  const Current = PAGES[route];
  return (
    <StepUpProvider>
      <a className="skip" href="#main">
        Skip to content
      </a>
      <div className="shell">
        <header className="topbar">
          <span className="brand">svc-gateway</span>
          <span className="who" title={session.keyId}>
            {session.keyName || session.keyId}
            {session.organizationId && <span className="muted"> · {session.organizationId}</span>}
          </span>
          <button
            type="button"
            className="secondary"
            onClick={() => {
              signOut();
              setEnded('You signed out.');
              setSession(null);
            }}
          >
            Sign out
          </button>
        </header>
        <nav className="nav" aria-label="Console pages">
          <ul>
            {ROUTES.map((r) => (
              <li key={r.path}>
                <a href={`#/${r.path}`} aria-current={r.path === route ? 'page' : undefined}>
                  {r.label}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        <main id="main" tabIndex={-1}>
          <Current key={route} session={session} />
        </main>
      </div>
    </StepUpProvider>
  );
}

function SignIn({ notice, onSignedIn }: { notice: string | null; onSignedIn: (session: Session) => void }) {
  const [key, setKey] = useState('');
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const session = await signIn(key);
      setKey('');
      onSignedIn(session);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <main className="signin" id="main">
      <form onSubmit={submit} className="card" aria-labelledby="signin-title" noValidate>
        <h1 id="signin-title">svc-gateway console</h1>
        <Notice>{notice}</Notice>
        <label htmlFor="management-key">Management key</label>
        <input
          id="management-key"
          name="management-key"
          type="password"
          autoComplete="off"
          spellCheck={false}
          placeholder="svc_test_… or svc_live_…"
          value={key}
          onChange={(e) => setKey(e.target.value)}
          aria-invalid={error ? true : undefined}
          aria-describedby={error ? 'signin-error' : 'signin-help'}
          autoFocus
        />
        <p className="muted small" id="signin-help">
          The key stays in this tab only (session storage) and is sent to this gateway's /v1 API, nowhere else.
        </p>
        <ErrorText error={error} id="signin-error" />
        <button type="submit" disabled={busy}>
          {busy ? 'Checking…' : 'Sign in'}
        </button>
      </form>
    </main>
  );
}
