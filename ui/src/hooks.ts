// Reading the app API from a view: fetch on mount, again when the path changes, and
// again when `refresh` changes (main.tsx bumps it whenever the dashboard changed), at
// most once every few seconds so a busy gateway does not turn into a busy page.

import { useCallback, useEffect, useRef, useState } from 'preact/hooks';

import { ApiFailure, appGet } from './api';

const MIN_GAP_MS = 3_000;

export type AppRead<T> = {
  /** The newest answer (kept while a new path loads, so lists do not flicker). */
  data: T | null;
  /** The path `data` answers. */
  dataPath: string | null;
  error: ApiFailure | null;
  /** The first answer for the current path has not come yet. */
  loading: boolean;
  reload: () => void;
};

export function useAppGet<T>(token: string, path: string | null, refresh: unknown): AppRead<T> {
  const [state, setState] = useState<{ data: T | null; dataPath: string | null; error: ApiFailure | null; errorPath: string | null }>({
    data: null,
    dataPath: null,
    error: null,
    errorPath: null,
  });
  const [nonce, setNonce] = useState(0);
  const seq = useRef(0);
  const last = useRef(0);
  const lastPath = useRef<string | null>(null);
  const alive = useRef(true);

  useEffect(() => {
    alive.current = true;
    return () => {
      alive.current = false;
    };
  }, []);

  useEffect(() => {
    if (path === null) return undefined;
    const run = () => {
      const mine = ++seq.current;
      last.current = Date.now();
      appGet<T>(token, path).then(
        (data) => {
          if (alive.current && mine === seq.current) setState({ data, dataPath: path, error: null, errorPath: null });
        },
        (e: unknown) => {
          if (!alive.current || mine !== seq.current) return;
          const error = e instanceof ApiFailure ? e : new ApiFailure(0, 'the app did not answer');
          setState((s) => ({ ...s, error, errorPath: path }));
        },
      );
    };
    const fresh = lastPath.current !== path;
    lastPath.current = path;
    const wait = fresh ? 0 : Math.max(0, MIN_GAP_MS - (Date.now() - last.current));
    if (wait === 0) {
      run();
      return undefined;
    }
    const timer = window.setTimeout(run, wait);
    return () => window.clearTimeout(timer);
  }, [token, path, refresh, nonce]);

  const reload = useCallback(() => {
    last.current = 0;
    setNonce((n) => n + 1);
  }, []);

  return {
    data: state.data,
    dataPath: state.dataPath,
    error: state.errorPath === path ? state.error : null,
    loading: path !== null && state.dataPath !== path && state.errorPath !== path,
    reload,
  };
}
