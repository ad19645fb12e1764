import { Fragment, useCallback, useEffect, useId, useRef, useState, type ReactNode } from 'react';
import { ApiFailure } from './api';

/** A page: its title, an optional line under it, and its sections. */
export function Page({ title, intro, actions, children }: { title: string; intro?: ReactNode; actions?: ReactNode; children: ReactNode }) {
  return (
    <section className="page" aria-labelledby="page-title">
      <header className="page-head">
        <div>
          <h1 id="page-title">{title}</h1>
          {intro && <p className="muted">{intro}</p>}
        </div>
        {actions && <div className="page-actions">{actions}</div>}
      </header>
      {children}
    </section>
  );
}

export function Card({ title, children, actions }: { title?: ReactNode; children: ReactNode; actions?: ReactNode }) {
  return (
    <div className="card">
      {(title || actions) && (
        <div className="card-head">
          {title && <h2>{title}</h2>}
          {actions}
        </div>
      )}
      {children}
    </div>
  );
}

export function Loading({ what }: { what: string }) {
  return (
    <p className="loading" role="status" aria-live="polite">
      Loading {what}…
    </p>
  );
}

export function Empty({ children }: { children: ReactNode }) {
  return <p className="empty">{children}</p>;
}

/** What an action or a session end did, in a live region; nothing when there is nothing to say. */
export function Notice({ children }: { children: ReactNode }) {
  return children ? (
    <p className="notice" role="status">
      {children}
    </p>
  ) : null;
}

/** The message of an API failure (or any error) in words, with its code for support. */
export function ErrorText({ error, id }: { error: unknown; id?: string }) {
  if (!error) return null;
  const failure = error instanceof ApiFailure ? error : null;
  const message = error instanceof Error ? error.message : String(error);
  return (
    <p className="error" role="alert" id={id}>
      {message}
      {failure?.code && <span className="error-code"> ({failure.code})</span>}
    </p>
  );
}

/**
 * Whether an API failure is about a field the form shows: its `param` is the field, or inside it
 * (`config.models[1]` belongs to `config`).
 */
export function isAbout(error: unknown, field: string): boolean {
  if (!(error instanceof ApiFailure) || error.param === null) return false;
  const param = error.param;
  return param === field || param.startsWith(`${field}.`) || param.startsWith(`${field}[`);
}

/** The failure next to the field it names, or nothing. */
export function FieldError({ error, field }: { error: unknown; field: string }) {
  return isAbout(error, field) ? <ErrorText error={error} id={`${field}-error`} /> : null;
}

/** aria-describedby for a control: its hint, and the failure next to it (FieldError's id) when there is one. */
export function describedBy(error: unknown, field: string, hint?: string): string | undefined {
  return [hint, isAbout(error, field) ? `${field}-error` : null].filter(Boolean).join(' ') || undefined;
}

/** The failure at form level when it names none of the form's fields. */
export function FormError({ error, fields }: { error: unknown; fields: string[] }) {
  if (!error || fields.some((f) => isAbout(error, f))) return null;
  return <ErrorText error={error} />;
}

export interface Loaded<T> {
  data: T | undefined;
  error: unknown;
  loading: boolean;
  reload: () => void;
}

/** Loads data for a page, again when `deps` change or on `reload()`. */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[]): Loaded<T> {
  const [state, setState] = useState<{ data: T | undefined; error: unknown; loading: boolean }>({ data: undefined, error: null, loading: true });
  const [round, setRound] = useState(0);
  const latest = useRef(0);
  useEffect(() => {
    const mine = ++latest.current;
    setState((s) => ({ ...s, loading: true }));
    load().then(
      (data) => mine === latest.current && setState({ data, error: null, loading: false }),
      (error: unknown) => mine === latest.current && setState({ data: undefined, error, loading: false }),
    );
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [...deps, round]);
  const reload = useCallback(() => setRound((r) => r + 1), []);
  return { ...state, reload };
}

/**
 * A `useLoad` result as a page shows it: "Loading…" until the first answer (a reload keeps the
 * data shown), then the failure, then `empty` for an empty list, else `children` with the data.
 * `failed` takes the failure's place where the page already says it elsewhere (next to a field).
 */
export function LoadState<T>({
  loaded,
  what,
  empty,
  failed,
  children,
}: {
  loaded: Pick<Loaded<T>, 'data' | 'error' | 'loading'>;
  what: string;
  empty?: ReactNode;
  failed?: ReactNode;
  children: (data: NonNullable<T>) => ReactNode;
}) {
  const { data, error, loading } = loaded;
  if (loading && data === undefined) return <Loading what={what} />;
  if (error) return failed ?? <ErrorText error={error} />;
  if (data === undefined || data === null) return null;
  if (Array.isArray(data) && data.length === 0 && empty !== undefined) return <Empty>{empty}</Empty>;
  return children(data);
}

/**
 * A value read from the location hash, read again whenever the hash changes. `read` is a pure
 * function of the hash, so the first one passed serves for good.
 */
export function useHash<T>(read: (hash: string) => T): T {
  const [value, setValue] = useState(() => read(location.hash));
  useEffect(() => {
    const follow = () => setValue(read(location.hash));
    addEventListener('hashchange', follow);
    return () => removeEventListener('hashchange', follow);
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, []);
  return value;
}

/** Runs an action, keeping whether it is busy and its failure; clears the failure on success. */
export function useAction() {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const run = useCallback(async <T,>(action: () => Promise<T>): Promise<T | undefined> => {
    setBusy(true);
    setError(null);
    try {
      return await action();
    } catch (err) {
      setError(err);
      return undefined;
    } finally {
      setBusy(false);
    }
  }, []);
  return { busy, error, setError, run };
}

/** Copies text to the clipboard, saying so. */
export function CopyButton({ text, label = 'Copy' }: { text: string; label?: string }) {
  const [done, setDone] = useState<'copied' | 'failed' | null>(null);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(text);
      setDone('copied');
    } catch {
      // Without clipboard permission (a plain-HTTP origin, say) the text is still selectable.
      setDone('failed');
    }
  };
  return (
    <button type="button" className="secondary" onClick={copy}>
      {done === 'copied' ? 'Copied' : done === 'failed' ? 'Copy failed: select the text' : label}
    </button>
  );
}

/**
 * A modal dialog on the native <dialog> element: focus moves into it, Escape closes it, and the
 * page behind cannot be reached by keyboard while it is open.
 */
export function Dialog({ open, title, onClose, children }: { open: boolean; title: string; onClose: () => void; children: ReactNode }) {
  const ref = useRef<HTMLDialogElement>(null);
  // Several dialogs may be on one page: each is named by its own heading.
  const titleId = useId();
  useEffect(() => {
    const dialog = ref.current;
    if (!dialog) return;
    if (open && !dialog.open) dialog.showModal();
    if (!open && dialog.open) dialog.close();
  }, [open]);
  return (
    <dialog ref={ref} aria-labelledby={titleId} onCancel={(e) => (e.preventDefault(), onClose())}>
      <h2 id={titleId}>{title}</h2>
      {open && children}
    </dialog>
  );
}

/** A destructive action behind a confirmation dialog. */
export function ConfirmButton({
  label,
  title,
  message,
  confirmLabel,
  onConfirm,
  disabled,
}: {
  label: string;
  title: string;
  message: ReactNode;
  confirmLabel: string;
  onConfirm: () => Promise<unknown>;
  disabled?: boolean;
}) {
  const [open, setOpen] = useState(false);
  const { busy, error, run } = useAction();
  const confirm = async () => {
    const done = await run(async () => {
      await onConfirm();
      return true;
    });
    if (done) setOpen(false);
  };
  return (
    <>
      <button type="button" className="danger" onClick={() => setOpen(true)} disabled={disabled}>
        {label}
      </button>
      <Dialog open={open} title={title} onClose={() => setOpen(false)}>
        <div className="dialog-body">{message}</div>
        <ErrorText error={error} />
        <div className="dialog-actions">
          <button type="button" className="secondary" onClick={() => setOpen(false)} disabled={busy}>
            Cancel
          </button>
          <button type="button" className="danger" onClick={confirm} disabled={busy}>
            {busy ? 'Working…' : confirmLabel}
          </button>
        </div>
      </Dialog>
    </>
  );
}

/**
 * The card of an item chosen in a list, below it: its heading takes focus and scrolls into view,
 * as following a link to a new page would, so a keyboard or a phone lands on what was opened.
 */
export function DetailCard({
  titleId,
  title,
  actions,
  onClose,
  children,
}: {
  titleId: string;
  title: ReactNode;
  actions: ReactNode;
  onClose: () => void;
  children: ReactNode;
}) {
  const heading = useRef<HTMLHeadingElement>(null);
  useEffect(() => {
    heading.current?.focus();
    heading.current?.scrollIntoView?.({ block: 'start', behavior: 'smooth' });
  }, []);
  return (
    <section className="card" aria-labelledby={titleId}>
      <div className="card-head">
        <h2 id={titleId} ref={heading} tabIndex={-1}>
          {title}
        </h2>
        <div className="page-actions">
          {actions}
          <button type="button" className="secondary" onClick={onClose}>
            Close
          </button>
        </div>
      </div>
      {children}
    </section>
  );
}

/** A table that scrolls sideways on a narrow screen instead of overflowing the page. */
export function Table({ label, className, children }: { label: string; className?: string; children: ReactNode }) {
  return (
    <div className={className ? `table-wrap ${className}` : 'table-wrap'} role="region" aria-label={label} tabIndex={0}>
      <table>{children}</table>
    </div>
  );
}

/**
 * A time as `when`/`atSecond` write it ("2026-03-03 10:20 UTC"), free to wrap between its date
 * and its clock where a table is short of room, never inside either.
 */
export function Stamp({ text, at }: { text: string; at?: string }) {
  const space = text.indexOf(' ');
  const parts =
    space < 0 ? (
      text
    ) : (
      <>
        <span className="nowrap">{text.slice(0, space)}</span> <span className="nowrap">{text.slice(space + 1)}</span>
      </>
    );
  return at ? <time dateTime={at}>{parts}</time> : <>{parts}</>;
}

/**
 * A name of dotted, snake_case or path parts (`key.spend_cap.warning`, `openai/gpt-4o`) that may
 * wrap after a dot, underscore or slash only.
 */
export function Breakable({ text }: { text: string }) {
  const pieces = text.split(/(?<=[._/])/);
  return (
    <>
      {pieces.map((piece, i) => (
        <Fragment key={i}>
          {piece}
          {i < pieces.length - 1 && <wbr />}
        </Fragment>
      ))}
    </>
  );
}
