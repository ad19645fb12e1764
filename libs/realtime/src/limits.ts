/**
 * Spec 3.3 (Realtime session row) and 8: a session closes after 60 minutes, or after 10 minutes
 * without a client event. Pure: the caller passes the time, read from its injected clock.
 */
export const SESSION_MAX_MS = 60 * 60_000;
export const SESSION_IDLE_MS = 10 * 60_000;

export type SessionEnd = 'session_expired' | 'session_idle_timeout';

/** Why a session opened at `startedMs`, last spoken to at `lastClientEventMs`, must end at `nowMs`; null while it may go on. */
export function sessionEnd(startedMs: number, lastClientEventMs: number, nowMs: number): SessionEnd | null {
  if (nowMs - startedMs >= SESSION_MAX_MS) return 'session_expired';
  if (nowMs - lastClientEventMs >= SESSION_IDLE_MS) return 'session_idle_timeout';
  return null;
}

export const SESSION_END_MESSAGES: Record<SessionEnd, string> = {
  session_expired: 'The realtime session reached its maximum duration of 60 minutes and was closed.',
  session_idle_timeout: 'The realtime session received no client event for 10 minutes and was closed.',
};
