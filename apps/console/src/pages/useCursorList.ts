import { useCallback, useEffect, useRef, useState } from 'react';
import { api, query } from '../api';
import { appendPage, emptyCursor, type CursorPage, type CursorState } from './cursorList';

const PAGE_SIZE = 20;

export interface CursorList<T> extends CursorState<T> {
  /** The first page is loading (at first or on reload). */
  loading: boolean;
  loadingMore: boolean;
  /** The failure of the last load, first page or more. */
  error: unknown;
  reload: () => void;
  loadMore: () => void;
  /** Changes the items shown (after a redelivery or a purge) without a reload. */
  update: (change: (state: CursorState<T>) => CursorState<T>) => void;
}

/** The cursor list at `path` of /v1 (`/webhook-events`, say), read page by page. */
export function useCursorList<T>(path: string, idOf: (item: T) => string): CursorList<T> {
  const load = (after: string | null) => api<CursorPage<T>>('GET', `${path}${query({ limit: PAGE_SIZE, after })}`);
  const [state, setState] = useState<CursorState<T>>(emptyCursor);
  const [loading, setLoading] = useState(true);
  const [loadingMore, setLoadingMore] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [round, setRound] = useState(0);
  // A reload outruns a page still loading: only the newest request's answer is kept.
  const latest = useRef(0);
  const loadRef = useRef(load);
  loadRef.current = load;
  const idRef = useRef(idOf);
  idRef.current = idOf;
  const stateRef = useRef(state);
  stateRef.current = state;

  useEffect(() => {
    const mine = ++latest.current;
    setLoading(true);
    setError(null);
    loadRef.current(null).then(
      (page) => mine === latest.current && (setState(appendPage(emptyCursor<T>(), page, idRef.current)), setLoading(false)),
      (err: unknown) => mine === latest.current && (setError(err), setLoading(false)),
    );
  }, [round]);

  const loadMore = useCallback(() => {
    const mine = ++latest.current;
    setLoadingMore(true);
    setError(null);
    loadRef.current(stateRef.current.after).then(
      (page) => mine === latest.current && (setState((s) => appendPage(s, page, idRef.current)), setLoadingMore(false)),
      (err: unknown) => mine === latest.current && (setError(err), setLoadingMore(false)),
    );
  }, []);

  const reload = useCallback(() => setRound((r) => r + 1), []);
  return { ...state, loading, loadingMore, error, reload, loadMore, update: setState };
}
