import { ApiError } from '@svc/platform';

/** A list's `limit` query: 1 to `max`, `fallback` when absent. */
export function limitOf(limit: unknown, options: { max: number; fallback: number }): number {
  const n = limit === undefined ? options.fallback : Number(limit);
  if (!Number.isInteger(n) || n < 1 || n > options.max) throw ApiError.invalidRequest(`limit must be an integer from 1 to ${options.max}.`, 'limit');
  return n;
}

/**
 * OpenAI's cursor lists: `limit` (1 to `max`) and `after` (the last id of the page before). A
 * page is read one row longer than asked, which says whether there is more.
 */
export function pageQuery(
  limit: unknown,
  after: unknown,
  options: { max: number; fallback: number; isId: (v: string) => boolean; what: string },
): { fetch: number; limit: number; after: string | null } {
  const n = limitOf(limit, options);
  if (after !== undefined && (typeof after !== 'string' || !options.isId(after))) throw ApiError.invalidRequest(`after must be ${options.what}.`, 'after');
  return { fetch: n + 1, limit: n, after: (after as string | undefined) ?? null };
}

/** `{object: "list", data, first_id, last_id, has_more}` from rows read with pageQuery's `fetch`. */
export function listPage<R, P>(rows: readonly R[], limit: number, idOf: (row: R) => string, present: (row: R) => P) {
  const page = rows.slice(0, limit);
  return {
    object: 'list' as const,
    data: page.map(present),
    first_id: page.length ? idOf(page[0]) : null,
    last_id: page.length ? idOf(page[page.length - 1]) : null,
    has_more: rows.length > limit,
  };
}
