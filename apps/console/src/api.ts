/**
 * The console's only way to the gateway: the public /v1 API with the signed-in management key,
 * so the console can do nothing its key could not do with curl.
 */
import type { KeyRecord } from './records';

/** An answer of the API that is not a success: the spec's error object (section 2.1), in words. */
export class ApiFailure extends Error {
  constructor(
    readonly status: number,
    readonly code: string | null,
    readonly param: string | null,
    message: string,
  ) {
    super(message);
  }
}

/** The management key of this tab, kept only in sessionStorage (gone when the tab closes). */
export interface Session {
  key: string;
  keyId: string;
  keyName: string | null;
  /** The account that holds the key (its creator): whose organizations the console shows. */
  accountId: string | null;
  organizationId: string | null;
  /** Milliseconds since the epoch of the last call made with the key. */
  lastActive: number;
}

const STORAGE_KEY = 'svc-console.session';

/** A console left alone this long forgets its key, as consoles holding a secret do. */
export const IDLE_LIMIT_MS = 30 * 60 * 1000;

type EndListener = (message: string) => void;
const endListeners = new Set<EndListener>();

/** Called when the session ends by itself (idle, or the key refused); the message says why. */
export function onSessionEnd(listener: EndListener): () => void {
  endListeners.add(listener);
  return () => endListeners.delete(listener);
}

export function loadSession(): Session | null {
  try {
    const raw = sessionStorage.getItem(STORAGE_KEY);
    return raw ? (JSON.parse(raw) as Session) : null;
  } catch {
    return null;
  }
}

function storeSession(session: Session): void {
  sessionStorage.setItem(STORAGE_KEY, JSON.stringify(session));
}

export function signOut(): void {
  sessionStorage.removeItem(STORAGE_KEY);
}

function endSession(message: string): never {
  signOut();
  for (const listener of endListeners) listener(message);
  throw new ApiFailure(401, 'session_ended', null, message);
}

/** What a 401 means to someone signed in, in words. */
function endedBecause(failure: ApiFailure): string {
  switch (failure.code) {
    case 'key_expired':
      return 'Your session has ended: the management key has expired. Sign in with another key.';
    case 'invalid_api_key':
      return 'Your session has ended: the management key was revoked or rotated. Sign in with a current key.';
    default:
      return `Your session has ended: ${failure.message}`;
  }
}

async function failureOf(response: Response): Promise<ApiFailure> {
  let body: unknown = null;
  try {
    body = await response.json();
  } catch {
    // A body that is not JSON (a proxy's page, say) is described by its status alone.
  }
  const error = (body as { error?: { message?: unknown; code?: unknown; param?: unknown } } | null)?.error;
  const message = typeof error?.message === 'string' ? error.message : `The gateway answered ${response.status} ${response.statusText}.`;
  return new ApiFailure(response.status, typeof error?.code === 'string' ? error.code : null, typeof error?.param === 'string' ? error.param : null, message);
}

async function send(key: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Response> {
  try {
    return await fetch(`/v1${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: 'no-store',
    });
  } catch {
    throw new ApiFailure(0, 'network_error', null, 'The gateway could not be reached. Check that it is running, then try again.');
  }
}

/** Checks a key and opens a session with it; throws an ApiFailure worded for the sign-in form. */
export async function signIn(key: string, now = Date.now()): Promise<Session> {
  const trimmed = key.trim();
  if (trimmed === '') throw new ApiFailure(400, 'missing_key', 'key', 'Enter a management key.');
  const response = await send(trimmed, 'GET', '/key');
  if (!response.ok) {
    const failure = await failureOf(response);
    if (response.status === 401) throw new ApiFailure(401, failure.code, 'key', `This key was not accepted: ${failure.message}`);
    throw failure;
  }
  const { data } = (await response.json()) as { data: KeyRecord };
  if (data.scope !== 'management') {
    throw new ApiFailure(403, 'management_key_required', 'key', `This is a ${data.scope} key. The console needs a key with the management scope.`);
  }
  const session: Session = {
    key: trimmed,
    keyId: data.id,
    keyName: data.name,
    accountId: data.created_by,
    organizationId: data.organization_id,
    lastActive: now,
  };
  storeSession(session);
  return session;
}

export interface CallOptions {
  body?: unknown;
  headers?: Record<string, string>;
}

/** A call with the session's key; JSON in and out. Ends the session when it is idle or refused. */
export async function api<T = unknown>(method: string, path: string, options: CallOptions = {}): Promise<T> {
  const session = loadSession();
  // Already ended (by an earlier call of the same page, say): keep the message that said why.
  if (!session) throw new ApiFailure(401, 'session_ended', null, 'You are signed out. Sign in with a management key.');
  const now = Date.now();
  if (now - session.lastActive > IDLE_LIMIT_MS) endSession('Your session expired after 30 minutes without activity. Sign in again.');
  storeSession({ ...session, lastActive: now });
  const response = await send(session.key, method, path, options.body, options.headers);
  if (response.status === 401) endSession(endedBecause(await failureOf(response)));
  if (!response.ok) throw await failureOf(response);
  if (response.status === 204) return undefined as T;
  return (await response.json()) as T;
}

/** A query string of the given values, leaving out empty ones. */
export function query(values: Record<string, string | number | undefined | null>): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(values)) if (value !== undefined && value !== null && value !== '') params.set(name, String(value));
  const text = params.toString();
  return text ? `?${text}` : '';
}
