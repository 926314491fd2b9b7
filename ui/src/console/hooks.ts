// Reading one admin API path: on mount, again when the path changes or `reload()` is
// called. The previous answer stays shown while a new one loads (no flicker on paging).

import { createContext } from 'preact';
import { useCallback, useContext, useEffect, useRef, useState } from 'preact/hooks';

import { ApiError, type Me, errorText, get } from './api';

export type Read<T> = {
  data: T | null;
  error: string | null;
  loading: boolean;
  reload: () => void;
};

export function useGet<T>(path: string | null): Read<T> {
  const [state, setState] = useState<{ data: T | null; error: string | null; path: string | null; done: string | null }>({
    data: null,
    error: null,
    path: null,
    done: null,
  });
  const [nonce, setNonce] = useState(0);
  const seq = useRef(0);
  useEffect(() => {
    if (path === null) return undefined;
    const mine = ++seq.current;
    let alive = true;
    get<T>(path).then(
      (data) => {
        if (alive && mine === seq.current) setState({ data, error: null, path, done: path });
      },
      (e: unknown) => {
        if (!alive || mine !== seq.current) return;
        const text = e instanceof ApiError && e.status === 404 ? `not found (${e.message})` : errorText(e);
        setState((s) => ({ ...s, error: text, done: path }));
      },
    );
    return () => {
      alive = false;
    };
  }, [path, nonce]);
  const reload = useCallback(() => setNonce((n) => n + 1), []);
  return { data: state.data, error: state.done === path ? state.error : null, loading: path !== null && state.done !== path, reload };
}

export type NoticeKind = 'ok' | 'error';

export type ConsoleCtx = {
  me: Me;
  canEdit: boolean;
  notify: (kind: NoticeKind, text: string) => void;
};

export const Ctx = createContext<ConsoleCtx | null>(null);

export function useConsole(): ConsoleCtx {
  const c = useContext(Ctx);
  if (!c) throw new Error('console context missing');
  return c;
}
