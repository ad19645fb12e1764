import { ArrayMaxSize, ArrayMinSize, IsArray, IsString, MaxLength } from 'class-validator';
import { Omittable } from '@svc/management';
import { ApiError } from '@svc/platform';

/** Spec 8: a lookup names up to 1,000 generations. */
export const MAX_LOOKUP_IDS = 1000;
/** Spec 8: activity covers the last 30 UTC days, today included. */
export const ACTIVITY_DAYS = 30;

const DAY_MS = 24 * 3600 * 1000;

/** The body of POST /v1/generations/lookup (spec 4.20). */
export class GenerationsLookupRequest {
  @IsArray({ message: 'ids must be an array of generation ids.' })
  @ArrayMinSize(1, { message: 'ids must hold at least one id.' })
  @ArrayMaxSize(MAX_LOOKUP_IDS, { message: `ids may hold at most ${MAX_LOOKUP_IDS} ids.` })
  @IsString({ each: true, message: 'ids must hold strings only.' })
  ids!: string[];
}

/** Inclusive UTC days `YYYY-MM-DD`. */
export interface DayRange {
  from: string;
  to: string;
}

/** The 30 days ending today (UTC) on the injected clock. */
export function activityWindow(now: Date): DayRange {
  const day = (ms: number) => new Date(ms).toISOString().slice(0, 10);
  return { from: day(now.getTime() - (ACTIVITY_DAYS - 1) * DAY_MS), to: day(now.getTime()) };
}

export interface ActivityFilters {
  date: string | null;
  keyId: string | null;
  user: string | null;
  /** Issue 44: the keys a guardrail applies to now (by current assignment, not at the time of each request). */
  guardrailId: string | null;
}

/** The query filters of GET /v1/activity; a bad one is a 400 naming it. */
export function parseActivityQuery(query: Record<string, unknown>, window: DayRange): ActivityFilters {
  const date = text(query, 'date');
  if (date !== null && !(isCalendarDay(date) && date >= window.from && date <= window.to)) {
    throw ApiError.invalidRequest(
      `date must be a day (YYYY-MM-DD, UTC) from ${window.from} to ${window.to}: activity covers the last ${ACTIVITY_DAYS} days.`,
      'date',
    );
  }
  return { date, keyId: text(query, 'key_id'), user: text(query, 'user'), guardrailId: text(query, 'guardrail_id') };
}

/** An optional single, non-empty query parameter (a repeated one arrives as an array). */
function text(query: Record<string, unknown>, name: string): string | null {
  const value = query[name];
  if (value === undefined) return null;
  if (typeof value !== 'string' || value === '') throw ApiError.invalidRequest(`${name} must be given once, as a non-empty string.`, name);
  return value;
}

function isCalendarDay(s: string): boolean {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(s)) return false;
  const parsed = new Date(`${s}T00:00:00Z`);
  // 2026-02-30 parses (as March 2nd): only a day that round-trips exists.
  return !Number.isNaN(parsed.getTime()) && parsed.toISOString().slice(0, 10) === s;
}

/** POST /v1/organizations: the name is the organization's id when left out. */
export class OrgRequest {
  @Omittable()
  @IsString({ message: 'name must be a string.' })
  @MaxLength(200, { message: 'name must be at most 200 characters.' })
  name?: string;
}
