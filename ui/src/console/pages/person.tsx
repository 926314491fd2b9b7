// One person: identity, spend standings (every period), Claude Code sessions of the last
// 7 days, models of the last 30, recent refusals, and Revoke sessions.

import { useState } from 'preact/hooks';

import { ORG, type Person, call, errorText } from '../api';
import { useConsole, useGet } from '../hooks';
import { ConfirmDialog, ErrorLine, Groups, Loading, UsageBar, centsToMicro, periodLabel, sourceLabel } from '../ui';
import { count, localTime, modelLabel, money, relative, resetsIn, shortTime, timeRange } from '../../format';

export function PersonPage({ id }: { id: string }) {
  const { canEdit, notify } = useConsole();
  const read = useGet<Person>(`${ORG}/users/${encodeURIComponent(id)}`);
  const [asking, setAsking] = useState(false);
  const [busy, setBusy] = useState(false);
  const [dialogError, setDialogError] = useState<string | null>(null);
  const p = read.data;
  const display = p ? (p.name && p.name.trim() !== '' ? p.name : p.id) : id;

  const revoke = async () => {
    setBusy(true);
    setDialogError(null);
    try {
      const r = await call<{ type: string; user_id: string; revoked_before: string }>(
        'POST',
        `${ORG}/users/${encodeURIComponent(id)}/revoke_sessions`,
      );
      setAsking(false);
      notify('ok', `Sessions revoked for ${display}: everything issued before ${localTime(r?.revoked_before)} stops working.`);
      read.reload();
    } catch (e) {
      setDialogError(errorText(e));
      notify('error', `Could not revoke the sessions: ${errorText(e)}`);
    } finally {
      setBusy(false);
    }
  };

  return (
    <section class="stack" aria-labelledby="h-person" data-page="person" data-user-page={id}>
      <p class="small">
        <a href="#people">← People</a>
      </p>
      {read.error && read.error.startsWith('not found') ? (
        <div class="card empty" data-testid="no-person">
          <p>
            Nobody with the id <strong class="clip-inline">{id}</strong> is in the directory. People appear after they sign in
            with Claude Code (<code>/login</code>) or <code>gatehouse login</code>; the directory forgets people who have not
            signed in for a long time.
          </p>
        </div>
      ) : (
        read.error && <ErrorLine error={read.error} retry={read.reload} />
      )}
      {read.loading && !p && <Loading what="this person" />}
      {p && (
        <>
          <div class="card person-head">
            <div class="person-id">
              <h2 id="h-person" class="clamp" title={display}>
                {display}
              </h2>
              <dl class="facts">
                <dt>Email</dt>
                <dd class="wrap-text">{p.email ?? '—'}</dd>
                <dt>User id</dt>
                <dd class="wrap-text mono">{p.id}</dd>
                <dt>Groups</dt>
                <dd>
                  <Groups groups={p.groups} />
                </dd>
                <dt>Last seen</dt>
                <dd title={localTime(p.last_seen_at)}>{relative(p.last_seen_at)}</dd>
                <dt>Sessions revoked</dt>
                <dd data-testid="revoked-before">
                  {p.sessions_revoked_before ? `everything issued before ${localTime(p.sessions_revoked_before)}` : 'never'}
                </dd>
              </dl>
            </div>
            <div class="person-actions">
              <button
                type="button"
                id="revoke-sessions"
                class="danger"
                data-edit="revoke"
                disabled={!canEdit}
                title={canEdit ? undefined : 'read-only (viewer)'}
                onClick={() => {
                  setDialogError(null);
                  setAsking(true);
                }}
              >
                Revoke sessions
              </button>
              <span class="muted small">Signs this person out everywhere.</span>
            </div>
          </div>

          <div class="card stack" data-testid="standings">
            <h3>Spend standings</h3>
            {p.standings.length === 0 ? (
              <p class="muted">No spend recorded and no cap binds this person.</p>
            ) : (
              <div class="meters">
                {p.standings.map((s) => (
                  <div class="meter" key={s.period} data-period={s.period}>
                    <div class="meter-head">
                      <span class="meter-name">{periodLabel(s.period)}</span>
                      <span class="muted small">{s.resets_at ? resetsIn(s.resets_at) : ''}</span>
                    </div>
                    <UsageBar spent={s.spent_micro_usd} cap={centsToMicro(s.amount)} label={`${s.period} spend`} />
                    <div class="meter-foot muted">
                      {s.amount === null ? 'No cap applies' : `Cap from: ${sourceLabel(s.source)}`}
                      {s.reserved_micro_usd > 0 ? ` · ${money(s.reserved_micro_usd)} reserved by requests in flight` : ''}
                    </div>
                  </div>
                ))}
              </div>
            )}
          </div>

          <div class="card stack" data-testid="sessions">
            <h3>Claude Code sessions, last 7 days</h3>
            {p.sessions.length === 0 ? (
              <p class="muted">No sessions in the last 7 days.</p>
            ) : (
              <div class="scroll">
                <table class="dense">
                  <thead>
                    <tr>
                      <th scope="col">Session</th>
                      <th scope="col">When</th>
                      <th scope="col">Models</th>
                      <th scope="col" class="num">Requests</th>
                      <th scope="col" class="num">Errors</th>
                      <th scope="col" class="num">Cost</th>
                    </tr>
                  </thead>
                  <tbody>
                    {p.sessions.map((s) => (
                      <tr key={s.session_id}>
                        <td class="mono">
                          <span class="clip" title={s.session_id}>
                            {s.session_id}
                          </span>
                        </td>
                        <td>{timeRange(s.first_at, s.last_at)}</td>
                        <td>
                          <span class="models">
                            {(s.models ?? []).map((m) => (
                              <span class="model" title={m} key={m}>
                                {modelLabel(m)}
                              </span>
                            ))}
                          </span>
                        </td>
                        <td class="num">{count(s.requests ?? 0)}</td>
                        <td class="num">{count(s.errors ?? 0)}</td>
                        <td class="num">{money(centsToMicro(s.cost) ?? 0)}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </div>
            )}
          </div>

          <div class={p.projects.length > 0 ? 'two-col' : 'stack'}>
            <div class="card stack" data-testid="models">
              <h3>Models, last 30 days</h3>
              {p.models.length === 0 ? (
                <p class="muted">No requests in the last 30 days.</p>
              ) : (
                <table class="dense">
                  <thead>
                    <tr>
                      <th scope="col">Model</th>
                      <th scope="col" class="num">Requests</th>
                      <th scope="col" class="num">Cost</th>
                    </tr>
                  </thead>
                  <tbody>
                    {p.models.map((m) => (
                      <tr key={m.model}>
                        <td class="model-name" title={m.model}>
                          {modelLabel(m.model)}
                        </td>
                        <td class="num">{count(m.requests)}</td>
                        <td class="num">{money(m.cost_micro_usd)}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              )}
            </div>
            {p.projects.length > 0 && (
              <div class="card stack" data-testid="projects">
                <h3>Projects</h3>
                <table class="dense">
                  <tbody>
                    {p.projects.map((x) => (
                      <tr key={x.project}>
                        <td class="clip" title={x.project}>
                          {x.project}
                        </td>
                        <td class="num">{count(x.sessions)} sessions</td>
                        <td class="num">{money(x.cost_micro_usd)}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </div>
            )}
          </div>

          <div class="card stack" data-testid="refusals">
            <h3>Recent refusals</h3>
            <p class="muted small">The most recent requests of this person the gateway refused (this replica's memory).</p>
            {p.refusals.length === 0 ? (
              <p class="muted">None.</p>
            ) : (
              <div class="scroll">
                <table class="dense">
                  <thead>
                    <tr>
                      <th scope="col">Time</th>
                      <th scope="col">Layer</th>
                      <th scope="col">Model</th>
                      <th scope="col" class="num">Status</th>
                      <th scope="col">Message</th>
                    </tr>
                  </thead>
                  <tbody>
                    {p.refusals.map((r) => (
                      <tr key={`${r.request_id}-${r.at}`}>
                        <td class="time" title={`${localTime(r.at)} · request ${r.request_id}`}>
                          {shortTime(r.at)}
                        </td>
                        <td>
                          <span class={`badge layer-${r.layer}`}>{r.layer}</span>
                        </td>
                        <td class="mono">{r.model ?? '—'}</td>
                        <td class="num">{r.status}</td>
                        <td class="wrap-text">{r.message}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </div>
            )}
          </div>
        </>
      )}
      {asking && (
        <ConfirmDialog
          title="Revoke this person's sessions?"
          confirmLabel="Revoke sessions"
          danger
          busy={busy}
          error={dialogError}
          onConfirm={() => void revoke()}
          onCancel={() => setAsking(false)}
        >
          <p>
            Every Gatehouse session and refresh token issued to <strong class="clip-inline">{display}</strong> before now
            stops working:
          </p>
          <ul>
            <li>their Claude Code and <code>gatehouse</code> CLI sessions stop working at the next refresh (within seconds, on every replica);</li>
            <li>their console sessions end.</li>
          </ul>
          <p class="muted">
            They can sign in again at once, if they still belong to the company directory. To keep them out, remove them in
            the IdP.
          </p>
        </ConfirmDialog>
      )}
    </section>
  );
}
