// Groups and budgets: every group's limits (`scope_type=rbac_group`), and on a group's
// monthly limit its shared (pooled) budget: how much of it the group used this month,
// pause / resume, and changing the amounts (previewed before saving).

import { useState } from 'preact/hooks';

import { ORG, type Page, type SpendLimit, call, errorText, query } from '../api';
import { useConsole, useGet } from '../hooks';
import {
  Empty,
  ErrorLine,
  Loading,
  Pager,
  ReadOnlyBadge,
  UsageBar,
  cents,
  centsToDollars,
  centsToMicro,
  dollarsToCents,
  modelName,
  periodLabel,
  usePages,
} from '../ui';
import { type LimitBody, SaveWithPreview } from './limits';

type Group = { id: string; limits: SpendLimit[] };

function groupsOf(limits: SpendLimit[]): Group[] {
  const m = new Map<string, SpendLimit[]>();
  for (const l of limits) {
    if (l.scope.type !== 'rbac_group') continue;
    const id = l.scope.rbac_group_id;
    if (!m.has(id)) m.set(id, []);
    m.get(id)?.push(l);
  }
  const order = ['daily', 'weekly', 'monthly', 'total'];
  return [...m.entries()].map(([id, ls]) => ({ id, limits: ls.sort((a, b) => order.indexOf(a.period) - order.indexOf(b.period)) }));
}

export function BudgetsPage() {
  const { canEdit } = useConsole();
  const pages = usePages();
  const read = useGet<Page<SpendLimit>>(`${ORG}/spend_limits${query({ scope_type: 'rbac_group', limit: 100, after_id: pages.token })}`);
  const groups = groupsOf(read.data?.data ?? []);
  return (
    <section class="stack" aria-labelledby="h-budgets" data-page="budgets">
      <div class="view-head">
        <h2 id="h-budgets">Groups and budgets</h2>
        {!canEdit && <ReadOnlyBadge />}
      </div>
      <p class="muted">
        A group's limit applies to each member on their own. A group's monthly limit may also carry a <strong class="fg">shared budget</strong>: one
        amount the whole group's spend counts against together.
      </p>
      {read.error && <ErrorLine error={read.error} retry={read.reload} />}
      {read.loading && !read.data && <Loading what="group limits" />}
      {read.data && groups.length === 0 && pages.index === 0 && (
        <Empty testid="no-groups">
          <p>
            No group has a limit yet. Groups come from your company IdP; give one a monthly limit (and, if you like, a shared
            budget) under Spend limits, choosing “A group”.
          </p>
          {canEdit && (
            <p>
              <a class="button-link" href="#limits">
                Create a group limit
              </a>
            </p>
          )}
        </Empty>
      )}
      <div class="budget-list">
        {groups.map((g) => (
          <GroupCard group={g} key={g.id} reload={read.reload} />
        ))}
      </div>
      <Pager pages={pages} nextToken={read.data?.has_more ? read.data.last_id : null} />
    </section>
  );
}

function GroupCard({ group, reload }: { group: Group; reload: () => void }) {
  const { canEdit, notify } = useConsole();
  const [busy, setBusy] = useState(false);
  const [editing, setEditing] = useState<SpendLimit | null>(null);
  const [member, setMember] = useState('');
  const [shared, setShared] = useState('');
  const [formError, setFormError] = useState<string | null>(null);
  const [review, setReview] = useState<LimitBody | null>(null);
  const [inlineError, setInlineError] = useState<string | null>(null);

  const pause = async (l: SpendLimit, paused: boolean) => {
    setBusy(true);
    setInlineError(null);
    try {
      await call('POST', `${ORG}/spend_limits`, {
        scope: l.scope,
        period: l.period,
        ...(l.model ? { model: l.model } : {}),
        pooled_budget: { paused },
      });
      notify('ok', `The shared budget of group ${group.id} is ${paused ? 'paused' : 'running again'}.`);
      reload();
    } catch (e) {
      setInlineError(errorText(e));
      notify('error', `Could not ${paused ? 'pause' : 'resume'} the shared budget: ${errorText(e)}`);
    } finally {
      setBusy(false);
    }
  };

  const startEdit = (l: SpendLimit) => {
    setEditing(l);
    setMember(centsToDollars(l.amount));
    setShared(centsToDollars(l.pooled_budget?.amount));
    setFormError(null);
  };

  const submit = (e: Event) => {
    e.preventDefault();
    if (!editing) return;
    const body: LimitBody = { scope: editing.scope, period: editing.period };
    if (editing.model) body.model = editing.model;
    if (member.trim() === '') body.amount = null;
    else {
      const c = dollarsToCents(member);
      if (c === null) return setFormError('Enter the per-person amount in dollars, or leave it empty for none.');
      body.amount = c;
    }
    if (editing.period === 'monthly' && shared.trim() !== '') {
      const c = dollarsToCents(shared);
      if (c === null) return setFormError('Enter the shared budget in dollars.');
      body.pooled_budget = { amount: c };
    }
    if (body.amount === null && !body.pooled_budget) return setFormError('Give an amount per person, a shared budget, or both.');
    setFormError(null);
    setReview(body);
  };

  return (
    <div class="card stack group-card" data-group={group.id}>
      <h3 class="clip" title={group.id}>
        <span class="muted small">Group</span> {group.id === '' ? '(no group)' : group.id}
      </h3>
      {inlineError && (
        <p class="banner error" role="alert">
          {inlineError}
        </p>
      )}
      <table class="dense fixed">
        <thead>
          <tr>
            <th scope="col" class="w-period">Period</th>
            <th scope="col" class="num w-period">Per person</th>
            <th scope="col" class="w-bar">Shared budget this month</th>
            <th scope="col" class="w-actions">
              <span class="visually-hidden">Actions</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {group.limits.map((l) => {
            const pb = l.pooled_budget;
            return (
              <tr key={l.id} data-limit={l.id}>
                <td>
                  {periodLabel(l.period)}
                  {l.model ? <span class="sub muted small">{modelName(l.model)}</span> : null}
                </td>
                <td class="num">{l.amount === null ? <span class="muted">no cap</span> : cents(l.amount)}</td>
                <td>
                  {pb ? (
                    <>
                      <UsageBar
                        spent={centsToMicro(pb.period_to_date_spend ?? '0') ?? 0}
                        cap={centsToMicro(pb.amount)}
                        label={`shared budget of ${group.id}`}
                      />
                      {pb.paused && <span class="badge warn">paused</span>}
                    </>
                  ) : (
                    <span class="muted">{l.period === 'monthly' ? 'none' : '—'}</span>
                  )}
                </td>
                <td class="actions">
                  {pb && (
                    <button
                      type="button"
                      class="secondary compact"
                      data-edit="pause"
                      disabled={!canEdit || busy}
                      title={canEdit ? undefined : 'read-only (viewer)'}
                      onClick={() => void pause(l, !pb.paused)}
                    >
                      {pb.paused ? 'Resume' : 'Pause'}
                    </button>
                  )}
                  {canEdit && (
                    <button type="button" class="secondary compact" data-edit="edit" onClick={() => startEdit(l)}>
                      Edit amount
                    </button>
                  )}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
      {editing && (
        <form class="row edit-amount" onSubmit={submit} noValidate>
          <label>
            {periodLabel(editing.period)} per person (USD)
            <input inputMode="decimal" value={member} placeholder="no cap" onInput={(e) => setMember(e.currentTarget.value)} />
          </label>
          {editing.period === 'monthly' && (
            <label>
              Shared budget (USD)
              <input inputMode="decimal" value={shared} placeholder="none" onInput={(e) => setShared(e.currentTarget.value)} />
            </label>
          )}
          <button type="submit" data-edit="save">
            Review and save
          </button>
          <button type="button" class="secondary" onClick={() => setEditing(null)}>
            Cancel
          </button>
          {formError && (
            <p class="banner error full" role="alert">
              {formError}
            </p>
          )}
        </form>
      )}
      {review && (
        <SaveWithPreview
          title={`Change the limits of group ${group.id}?`}
          body={review}
          onClose={() => setReview(null)}
          onSaved={() => {
            setReview(null);
            setEditing(null);
            reload();
          }}
        />
      )}
    </div>
  );
}
