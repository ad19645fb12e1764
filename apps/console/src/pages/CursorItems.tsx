import type { ReactNode } from 'react';
import { Empty, ErrorText, Loading } from '../ui';
import type { CursorList } from './useCursorList';

/**
 * A cursor list as a card shows it: "Loading…" until the first page, `empty` when there is
 * nothing, else `children` with the items, then "Load more" while the API has more. The failure
 * stays under the items, so a page that failed to load more keeps the ones already read.
 */
export function CursorItems<T>({ list, what, empty, children }: { list: CursorList<T>; what: string; empty: ReactNode; children: (items: T[]) => ReactNode }) {
  return (
    <>
      {list.loading && list.items.length === 0 ? (
        <Loading what={what} />
      ) : list.items.length === 0 && !list.error ? (
        <Empty>{empty}</Empty>
      ) : (
        list.items.length > 0 && children(list.items)
      )}
      <ErrorText error={list.error} />
      {list.hasMore && (
        <button type="button" className="secondary" onClick={list.loadMore} disabled={list.loadingMore}>
          {list.loadingMore ? 'Loading…' : 'Load more'}
        </button>
      )}
    </>
  );
}
