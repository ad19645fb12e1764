/**
 * The API's cursor lists (`{object: "list", data, first_id, last_id, has_more}`, newest first,
 * `after=<last_id>` for the next page) kept as one growing list. Pure, so the paging rules are
 * pinned by tests.
 */

export interface CursorPage<T> {
  data: T[];
  first_id: string | null;
  last_id: string | null;
  has_more: boolean;
}

export interface CursorState<T> {
  items: T[];
  /** The cursor for the next page: the last id seen. */
  after: string | null;
  hasMore: boolean;
}

export const emptyCursor = <T>(): CursorState<T> => ({ items: [], after: null, hasMore: false });

/**
 * A page added after the ones shown. An item that moved onto this page since the last one was
 * read (a new row pushes the older ones down) is shown once, where it was first seen.
 */
export function appendPage<T>(state: CursorState<T>, page: CursorPage<T>, idOf: (item: T) => string): CursorState<T> {
  const seen = new Set(state.items.map(idOf));
  return {
    items: [...state.items, ...page.data.filter((item) => !seen.has(idOf(item)))],
    after: page.last_id ?? state.after,
    hasMore: page.has_more,
  };
}

/** The list with one item replaced by a newer copy of it (same id); unchanged when absent. */
export function replaceItem<T>(items: T[], fresh: T, idOf: (item: T) => string): T[] {
  const id = idOf(fresh);
  return items.map((item) => (idOf(item) === id ? fresh : item));
}

/** The list without the item of that id. */
export function withoutItem<T>(state: CursorState<T>, id: string, idOf: (item: T) => string): CursorState<T> {
  return { ...state, items: state.items.filter((item) => idOf(item) !== id) };
}
