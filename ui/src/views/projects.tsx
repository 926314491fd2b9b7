// Projects (desktop only): what Claude Code spent per project (its working directory) over
// the last 30 days, sortable by any column and searchable by name.

import { useState } from 'preact/hooks';

import { type InsightProject, type InsightProjects, insightProjectsPath } from '../api';
import { count, localTime, money, ratio, relative, shortTime } from '../format';
import { useAppGet } from '../hooks';
import { type Go, NoSessions, WINDOW_DAYS, searchSessionsFor } from './common';
import { SortHeader, type SortValue, sortRows, useSort } from './table';

type Col = 'name' | 'today' | 'week' | 'month' | 'sessions' | 'subagent' | 'cache' | 'last';

function valueOf(p: InsightProject, col: Col): SortValue {
  switch (col) {
    case 'name':
      return p.name;
    case 'today':
      return p.cost_today_micro_usd;
    case 'week':
      return p.cost_week_micro_usd;
    case 'month':
      return p.cost_month_micro_usd;
    case 'sessions':
      return p.sessions;
    case 'subagent':
      return p.subagent_share;
    case 'cache':
      return p.cache_read_ratio;
    case 'last':
      return p.last_at ? new Date(p.last_at).getTime() : null;
  }
}

/** The name; an unknown project's `(session 1a2b3c4d…)` part quieter than the rest. */
function ProjectLabel({ p }: { p: InsightProject }) {
  const m = p.known ? null : /^(.*?)( \(.*\))$/.exec(p.name);
  if (!m) return <>{p.name}</>;
  return (
    <>
      <span class="unknown">{m[1]}</span>
      <span class="small">{m[2]}</span>
    </>
  );
}

export function ProjectsView({ token, tick, go }: { token: string; tick: unknown; go: Go }) {
  const read = useAppGet<InsightProjects>(token, insightProjectsPath(WINDOW_DAYS), tick);
  const [q, setQ] = useState('');
  const { sort, toggle } = useSort<Col>({ key: 'month', dir: 'descending' }, ['name']);
  const all = read.data?.projects ?? [];
  const needle = q.trim().toLowerCase();
  const shown = sortRows(
    needle === '' ? all : all.filter((p) => `${p.name} ${p.path ?? ''}`.toLowerCase().includes(needle)),
    sort,
    valueOf,
  );
  const head = { sort, toggle };
  return (
    <section class="stack" aria-labelledby="h-projects" data-testid="projects-view">
      <div class="view-head">
        <h2 id="h-projects">Projects</h2>
        <span class="muted small">
          Claude Code's spend per project (working directory) over the last {WINDOW_DAYS} days; click a project for its
          sessions
        </span>
      </div>
      {read.error && (
        <p class="banner error" role="alert" data-testid="projects-error">
          Could not read the projects: {read.error.message}
        </p>
      )}
      {read.loading && <p class="muted">Loading…</p>}
      {read.data && all.length === 0 && <NoSessions go={go} testid="projects-empty" />}
      {all.length > 0 && (
        <>
          <div class="toolbar">
            <input
              type="search"
              value={q}
              aria-label="Search projects"
              placeholder="Search by name or folder"
              data-testid="project-search"
              onInput={(e) => setQ(e.currentTarget.value)}
            />
            <span class="muted small" role="status" data-testid="projects-count">
              {shown.length === all.length
                ? `${count(all.length)} ${all.length === 1 ? 'project' : 'projects'}`
                : `${count(shown.length)} of ${count(all.length)} projects`}
            </span>
          </div>
          {shown.length === 0 ? (
            <p class="muted" data-testid="projects-no-match">
              No project matches “{q.trim()}”.
            </p>
          ) : (
            <div class="scroll">
              <table data-testid="projects">
                <caption class="visually-hidden">Projects, sortable by each column</caption>
                <thead>
                  <tr>
                    <SortHeader id="name" {...head}>Project</SortHeader>
                    <SortHeader id="today" num title="Today" {...head}>Today</SortHeader>
                    <SortHeader id="week" num title="The last 7 days, today included" {...head}>7 days</SortHeader>
                    <SortHeader id="month" num title={`The last ${WINDOW_DAYS} days`} {...head}>{WINDOW_DAYS} days</SortHeader>
                    <SortHeader id="sessions" num {...head}>Sessions</SortHeader>
                    <SortHeader id="subagent" num title="Share of the cost spent by subagents" {...head}>Subagents</SortHeader>
                    <SortHeader id="cache" num title="Share of the prompt read from the cache" {...head}>Cache read</SortHeader>
                    <SortHeader id="last" title="The project's last request" {...head}>Last active</SortHeader>
                  </tr>
                </thead>
                <tbody>
                  {shown.map((p) => (
                    <tr data-testid="project-row" data-key={p.key} key={p.key}>
                      <td class="project-cell">
                        <a
                          href="#sessions"
                          class={p.known ? 'plain-link' : 'plain-link muted'}
                          title={`${p.path ?? 'No Claude Code transcript names this folder'} — show its sessions`}
                          data-testid="project-name"
                          onClick={(e) => {
                            e.preventDefault();
                            searchSessionsFor(p.path ?? p.key.replace(/^session:/, ''));
                            go('sessions');
                          }}
                        >
                          <ProjectLabel p={p} />
                        </a>
                      </td>
                      <td class="num" data-testid="project-cost-today">{money(p.cost_today_micro_usd)}</td>
                      <td class="num" data-testid="project-cost-week">{money(p.cost_week_micro_usd)}</td>
                      <td class="num" data-testid="project-cost-month">{money(p.cost_month_micro_usd)}</td>
                      <td class="num" data-testid="project-sessions" title={`${count(p.requests)} requests`}>
                        {count(p.sessions)}
                      </td>
                      <td
                        class="num"
                        data-testid="project-subagent-share"
                        title={`${money(p.subagent_cost_micro_usd)} on subagents`}
                      >
                        {ratio(p.subagent_share)}
                      </td>
                      <td class="num" data-testid="project-cache-ratio">{ratio(p.cache_read_ratio)}</td>
                      <td class="time" data-testid="project-last" title={`${localTime(p.last_at)} (${relative(p.last_at)})`}>
                        {shortTime(p.last_at)}
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )}
        </>
      )}
    </section>
  );
}
