// People: the identity directory (`/users`, searchable, paged), each person's groups and,
// from `/spend_limits/effective` for the same people, their spend per period against the
// cap that binds them and where that cap comes from, their open reservations and when
// they were last seen. Merged by user id.

import { useMemo, useState } from 'preact/hooks';

import { ORG, type Page, type Standing, type User, query } from '../api';
import { useGet } from '../hooks';
import { Empty, ErrorLine, Groups, Loading, Pager, PersonName, UsageBar, centsToMicro, periodLabel, sourceLabel, usePages } from '../ui';
import { useDebounced } from '../../views/common';
import { localTime, money, relative } from '../../format';

const PAGE_SIZE = 25;
const PERIODS = ['daily', 'weekly', 'monthly'] as const;

export function PeoplePage() {
  const [q, setQ] = useState('');
  const settled = useDebounced(q.trim(), 300);
  const pages = usePages(settled);
  const users = useGet<Page<User>>(`${ORG}/users${query({ q: settled, limit: PAGE_SIZE, page: pages.token })}`);
  const ids = users.data?.data.map((u) => u.id) ?? [];
  const effPath =
    ids.length === 0
      ? null
      : `${ORG}/spend_limits/effective${query({ 'user_ids[]': ids, 'period[]': [...PERIODS], limit: ids.length })}`;
  const eff = useGet<Page<Standing>>(effPath);

  const byUser = useMemo(() => {
    const m = new Map<string, Map<string, Standing>>();
    for (const s of eff.data?.data ?? []) {
      const id = s.actor?.user_id ?? (s.scope.type === 'user' ? s.scope.user_id : '');
      if (!m.has(id)) m.set(id, new Map());
      m.get(id)?.set(s.period, s);
    }
    return m;
  }, [eff.data]);
  const weekly = (eff.data?.data ?? []).some((s) => s.period === 'weekly' && s.amount !== null);
  const shown = PERIODS.filter((p) => p !== 'weekly' || weekly);
  const list = users.data?.data ?? [];

  return (
    <section class="stack" aria-labelledby="h-people" data-page="people">
      <div class="view-head">
        <h2 id="h-people">People</h2>
      </div>
      <div class="toolbar">
        <label class="grow">
          <span class="visually-hidden">Search people</span>
          <input
            id="people-search"
            type="search"
            placeholder="Search by name, email or id"
            value={q}
            onInput={(e) => setQ(e.currentTarget.value)}
          />
        </label>
      </div>
      {users.error && <ErrorLine error={users.error} retry={users.reload} />}
      {eff.error && <ErrorLine error={`spend standings: ${eff.error}`} retry={eff.reload} />}
      {users.loading && !users.data && <Loading what="people" />}
      {users.data && list.length === 0 && settled === '' && pages.index === 0 && (
        <Empty testid="no-people">
          <p>
            Nobody yet. People appear here after they sign in with Claude Code (<code>/login</code>) or{' '}
            <code>gatehouse login</code>, through this gateway's company sign-in.
          </p>
        </Empty>
      )}
      {users.data && list.length === 0 && settled !== '' && (
        <Empty testid="no-match">
          <p>Nobody matches “{settled}”.</p>
        </Empty>
      )}
      {list.length > 0 && (
        <div class="scroll">
          <table class="people fixed" data-testid="people">
            <thead>
              <tr>
                <th scope="col" class="w-person">Person</th>
                <th scope="col" class="w-groups">Groups</th>
                {shown.map((p) => (
                  <th scope="col" class="w-bar" key={p}>
                    {periodLabel(p)}
                  </th>
                ))}
                <th scope="col" class="num">Reserved</th>
                <th scope="col">Last seen</th>
              </tr>
            </thead>
            <tbody>
              {list.map((u) => {
                const st = byUser.get(u.id);
                const reserved = Math.max(0, ...[...(st?.values() ?? [])].map((s) => s.reserved_micro_usd ?? 0));
                return (
                  <tr key={u.id} data-user={u.id}>
                    <td>
                      <PersonName id={u.id} name={u.name} email={u.email} />
                    </td>
                    <td>
                      <Groups groups={u.groups} />
                    </td>
                    {shown.map((p) => {
                      const s = st?.get(p);
                      return (
                        <td key={p} data-period={p}>
                          {s ? (
                            <>
                              <UsageBar spent={s.spent_micro_usd} cap={centsToMicro(s.amount)} label={`${p} spend`} />
                              {s.amount !== null && <span class="sub muted small">cap: {sourceLabel(s.source)}</span>}
                            </>
                          ) : eff.loading ? (
                            <span class="muted">…</span>
                          ) : (
                            <span class="muted">—</span>
                          )}
                        </td>
                      );
                    })}
                    <td class="num">{reserved > 0 ? money(reserved) : <span class="muted">—</span>}</td>
                    <td title={localTime(u.last_seen_at)}>{relative(u.last_seen_at)}</td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
      <Pager pages={pages} nextToken={users.data?.has_more ? users.data.next_page : null} />
    </section>
  );
}
