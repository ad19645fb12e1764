import { DomainError } from '@svc/eventstore';
import type { StatementPeriod } from './model';

/** The longest period stated at once: a year, leap day included. */
export const MAX_STATEMENT_DAYS = 366;
const DAY_MS = 86_400_000;

const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,3}))?)?(Z|[+-]\d{2}:\d{2})?$/;

/**
 * An ISO 8601 date (its 00:00 UTC) or date-time (UTC when it has no offset); null when it is
 * neither, or names no real instant. The one reading of a time argument, for every CLI option
 * and API parameter (issue 41 item 16): `new Date(text)` would read a date-time without an
 * offset in the machine's zone, so the same command would name another instant on another host.
 */
export function parseStatementInstant(text: string): Date | null {
  const date = DATE.exec(text);
  if (date) {
    const [, y, m, d] = date.map(Number);
    const ms = Date.UTC(y, m - 1, d);
    const at = new Date(ms);
    return at.getUTCFullYear() === y && at.getUTCMonth() === m - 1 && at.getUTCDate() === d ? at : null;
  }
  const dt = DATE_TIME.exec(text);
  if (!dt) return null;
  const [y, mo, d, h, mi, s] = dt.slice(1, 7).map((v) => Number(v ?? 0));
  const ms = Number((dt[7] ?? '0').padEnd(3, '0'));
  const local = Date.UTC(y, mo - 1, d, h, mi, s, ms);
  const check = new Date(local);
  // 2026-02-30 or 25:00 would roll over into another instant: only a time that round-trips exists.
  if (
    check.getUTCFullYear() !== y ||
    check.getUTCMonth() !== mo - 1 ||
    check.getUTCDate() !== d ||
    check.getUTCHours() !== h ||
    check.getUTCMinutes() !== mi ||
    check.getUTCSeconds() !== s
  ) {
    return null;
  }
  const offset = dt[8];
  if (offset === undefined || offset === 'Z') return check;
  const [oh, om] = offset.slice(1).split(':').map(Number);
  if (oh > 23 || om > 59) return null;
  return new Date(local - (offset[0] === '-' ? -1 : 1) * (oh * 60 + om) * 60_000);
}

const invalid = (param: 'from' | 'to', code: string, message: string) => new DomainError(code, message, { param });

/**
 * `from` and `to` as asked (a query parameter or a CLI option): a period that has ended, `from`
 * before `to`, at most MAX_STATEMENT_DAYS long. A refusal names the parameter at fault.
 */
export function parseStatementPeriod(input: { from: unknown; to: unknown }, now: Date): StatementPeriod {
  const instant = (param: 'from' | 'to'): Date => {
    const value = input[param];
    if (value === undefined || value === null || value === '')
      throw invalid(param, 'missing_parameter', `${param} is required: an ISO 8601 date or date-time.`);
    const at = typeof value === 'string' ? parseStatementInstant(value) : null;
    if (at === null) {
      throw invalid(
        param,
        'invalid_date',
        `${param} must be an ISO 8601 date (2026-11-01) or date-time (2026-11-01T00:00:00Z; UTC when no offset is given), given once.`,
      );
    }
    return at;
  };
  const from = instant('from');
  const to = instant('to');
  if (from.getTime() >= to.getTime()) throw invalid('from', 'invalid_period', `from (${from.toISOString()}) must be before to (${to.toISOString()}).`);
  if (to.getTime() > now.getTime())
    throw invalid(
      'to',
      'period_not_ended',
      `to (${to.toISOString()}) is in the future: only a period that has ended is stated, so that its statement never changes.`,
    );
  if (to.getTime() - from.getTime() > MAX_STATEMENT_DAYS * DAY_MS)
    throw invalid('to', 'period_too_long', `A statement covers at most ${MAX_STATEMENT_DAYS} days; ask for several.`);
  return { from, to };
}
