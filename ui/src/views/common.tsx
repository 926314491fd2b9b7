// Small pieces the insight views share: links between tabs, the empty state, a debounced
// value and the look-back window.

import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';

/** The tabs a view can send the person to. */
export type TabId = 'setup' | 'dashboard' | 'projects' | 'sessions' | 'settings';
export type Go = (tab: TabId) => void;

/** How far back Projects, Sessions and the charts look, in days. */
export const WINDOW_DAYS = 30;

/** A link to another tab (a real link: it works with the keyboard and says where it goes). */
export function TabLink({ to, go, testid, children }: { to: TabId; go: Go; testid?: string; children: ComponentChildren }) {
  return (
    <a
      href={`#${to}`}
      data-testid={testid}
      onClick={(e) => {
        e.preventDefault();
        go(to);
      }}
    >
      {children}
    </a>
  );
}

/** Nothing from Claude Code yet: say what to do about it. */
export function NoSessions({ go, testid }: { go: Go; testid: string }) {
  return (
    <div class="card empty" data-testid={testid}>
      <p>
        No Claude Code sessions yet. Point Claude Code at Gatehouse in{' '}
        <TabLink to="setup" go={go}>
          Get started
        </TabLink>
        , then run <code>claude</code> in a project.
      </p>
    </div>
  );
}

/** What Sessions searches for when it opens next (Projects sets it: "this project's sessions"). */
let sessionSearch = '';
export function searchSessionsFor(q: string) {
  sessionSearch = q;
}
/** Takes the search Projects left for Sessions, once. */
export function takeSessionSearch(): string {
  const q = sessionSearch;
  sessionSearch = '';
  return q;
}

/** `value`, once it has stopped changing for `ms`. */
export function useDebounced<T>(value: T, ms: number): T {
  const [settled, setSettled] = useState(value);
  useEffect(() => {
    const t = window.setTimeout(() => setSettled(value), ms);
    return () => window.clearTimeout(t);
  }, [value, ms]);
  return settled;
}
