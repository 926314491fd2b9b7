// Spend limits: the list (scope, period, model, amount, shared budget), and a form that
// creates or changes one. Before anything is saved, `POST /spend_limits/preview` says what
// saving would do (whom it binds, what it replaces) and the admin confirms or cancels.
// Delete confirms too.

import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';

import { ORG, type Page, type Preview, type Scope, type SpendLimit, call, errorText, query } from '../api';
import { useConsole, useGet } from '../hooks';
import {
  ConfirmDialog,
  Empty,
  ErrorLine,
  Loading,
  Pager,
  ReadOnlyBadge,
  cents,
  centsToDollars,
  dollarsToCents,
  modelName,
  periodLabel,
  usePages,
} from '../ui';
import { localTime, shortTime } from '../../format';

export type LimitBody = {
  scope: Scope;
  period: string;
  amount?: string | null;
  model?: string;
  pooled_budget?: { amount?: string; paused?: boolean };
};

export function scopeWords(s: Scope): string {
  if (s.type === 'organization') return 'the organization';
  if (s.type === 'rbac_group') return `group ${s.rbac_group_id}`;
  return `person ${s.user_id}`;
}

/** A body in words, for notices: `daily limit of $5.00 for person alice`. */
export function describe(b: LimitBody): string {
  const parts: string[] = [];
  if (b.amount) parts.push(`${periodLabel(b.period).toLowerCase()} limit of ${cents(b.amount)}`);
  else parts.push(`${periodLabel(b.period).toLowerCase()} limit`);
  if (b.model) parts.push(`(${b.model} only)`);
  parts.push(`for ${scopeWords(b.scope)}`);
  if (b.pooled_budget?.amount) parts.push(`with a shared budget of ${cents(b.pooled_budget.amount)}`);
  if (b.pooled_budget?.paused !== undefined) parts.push(b.pooled_budget.paused ? '(shared budget paused)' : '(shared budget running)');
  return parts.join(' ');
}

/**
 * Preview, then confirm: asks the gateway what saving `body` would do, shows it, and on
 * Confirm saves it. `onSaved` after a successful save.
 */
export function SaveWithPreview({
  body,
  onClose,
  onSaved,
  title,
}: {
  body: LimitBody;
  title: string;
  onClose: () => void;
  onSaved: () => void;
}) {
  const { notify } = useConsole();
  const [preview, setPreview] = useState<Preview | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    let alive = true;
    call<Preview>('POST', `${ORG}/spend_limits/preview`, body).then(
      (p) => alive && setPreview(p),
      (e: unknown) => alive && setError(`Could not preview: ${errorText(e)}`),
    );
    return () => {
      alive = false;
    };
  }, [body]);
  const save = async () => {
    setBusy(true);
    setError(null);
    try {
      await call<SpendLimit>('POST', `${ORG}/spend_limits`, body);
      notify('ok', `Saved: ${describe(body)}.`);
      onSaved();
    } catch (e) {
      setError(errorText(e));
      notify('error', `Not saved: ${errorText(e)}`);
    } finally {
      setBusy(false);
    }
  };
  return (
    <ConfirmDialog
      title={title}
      confirmLabel={preview?.action === 'update' ? 'Confirm change' : 'Confirm and save'}
      busy={busy || (!preview && !error)}
      error={error}
      onConfirm={() => void save()}
      onCancel={onClose}
    >
      {!preview && !error && <Loading what="what this would do" />}
      {preview && <PreviewFacts preview={preview} />}
      {preview && <p class="muted small">Nothing is saved until you confirm.</p>}
    </ConfirmDialog>
  );
}

function PreviewFacts({ preview }: { preview: Preview }) {
  const sample = preview.binds?.sample ?? [];
  const people = preview.binds?.people ?? 0;
  return (
    <div class="stack preview" data-testid="preview">
      <p id="preview-message" class="preview-message">
        {preview.message}
      </p>
      <dl class="facts">
        <dt>Action</dt>
        <dd data-testid="preview-action">{preview.action === 'update' ? 'changes an existing limit' : 'creates a new limit'}</dd>
        <dt>Binds</dt>
        <dd data-testid="preview-people">
          {people === 1 ? '1 person' : `${people} people`}
          {sample.length > 0 && (
            <span class="sample">
              {sample.map((id, i) => (
                <span key={`${i}-${id}`}>
                  {i > 0 ? ', ' : ' — '}
                  <span class="clip-inline" title={id}>
                    {id}
                  </span>
                </span>
              ))}
              {people > sample.length ? `, and ${people - sample.length} more` : ''}
            </span>
          )}
        </dd>
        <dt>Replaces</dt>
        <dd data-testid="preview-replaces">
          {preview.replaces ? (
            <>
              {periodLabel(preview.replaces.period)} {cents(preview.replaces.amount)}
              {preview.replaces.model ? ` (${preview.replaces.model})` : ''} · <span class="mono">{preview.replaces.id}</span>
            </>
          ) : (
            'nothing (a new limit)'
          )}
        </dd>
      </dl>
    </div>
  );
}

type Form = { scopeType: Scope['type']; scopeId: string; period: string; model: string; amount: string; pooled: string };
const EMPTY: Form = { scopeType: 'user', scopeId: '', period: 'daily', model: '', amount: '', pooled: '' };

function bodyOf(f: Form): { body: LimitBody } | { error: string } {
  const id = f.scopeId.trim();
  let scope: Scope;
  if (f.scopeType === 'organization') scope = { type: 'organization' };
  else if (!id) return { error: f.scopeType === 'user' ? 'Enter the person’s user id.' : 'Enter the group’s name.' };
  else scope = f.scopeType === 'user' ? { type: 'user', user_id: id } : { type: 'rbac_group', rbac_group_id: id };
  const amount = dollarsToCents(f.amount);
  if (amount === null) return { error: 'Enter the amount in dollars, e.g. 25 or 12.50.' };
  const body: LimitBody = { scope, period: f.period, amount };
  if (f.model) body.model = f.model;
  if (f.scopeType === 'rbac_group' && f.period === 'monthly' && f.pooled.trim() !== '') {
    const pooled = dollarsToCents(f.pooled);
    if (pooled === null) return { error: 'Enter the shared budget in dollars, or leave it empty.' };
    body.pooled_budget = { amount: pooled };
  }
  return { body };
}

function LimitForm({ form, setForm, onReview, canEdit }: { form: Form; setForm: (f: Form) => void; onReview: (b: LimitBody) => void; canEdit: boolean }) {
  const [error, setError] = useState<string | null>(null);
  const set = (patch: Partial<Form>) => setForm({ ...form, ...patch });
  const submit = (e: Event) => {
    e.preventDefault();
    const r = bodyOf(form);
    if ('error' in r) {
      setError(r.error);
      return;
    }
    setError(null);
    onReview(r.body);
  };
  const pooledShown = form.scopeType === 'rbac_group' && form.period === 'monthly';
  return (
    <form class="card stack limit-form" id="limit-form" onSubmit={submit} noValidate>
      <div class="view-head">
        <h3>Create or change a limit</h3>
        {!canEdit && <ReadOnlyBadge />}
      </div>
      <p class="muted small">
        One limit per scope, period and model: saving one that exists changes it. You see whom it binds before it is saved.
      </p>
      <fieldset disabled={!canEdit} class="row">
        <label>
          Applies to
          <select id="limit-scope-type" value={form.scopeType} onChange={(e) => set({ scopeType: e.currentTarget.value as Scope['type'] })}>
            <option value="user">A person</option>
            <option value="rbac_group">A group</option>
            <option value="organization">The whole organization</option>
          </select>
        </label>
        <label class="grow">
          {form.scopeType === 'rbac_group' ? 'Group name' : 'User id'}
          <input
            id="limit-scope-id"
            value={form.scopeType === 'organization' ? '' : form.scopeId}
            disabled={form.scopeType === 'organization'}
            placeholder={form.scopeType === 'organization' ? 'everyone' : form.scopeType === 'user' ? 'e.g. alice' : 'e.g. engineering'}
            onInput={(e) => set({ scopeId: e.currentTarget.value })}
          />
        </label>
        <label>
          Period
          <select id="limit-period" value={form.period} onChange={(e) => set({ period: e.currentTarget.value })}>
            <option value="daily">Daily</option>
            <option value="weekly">Weekly</option>
            <option value="monthly">Monthly</option>
            <option value="total">Total</option>
          </select>
        </label>
        <label>
          Model
          <select id="limit-model" value={form.model} onChange={(e) => set({ model: e.currentTarget.value })}>
            <option value="">All models</option>
            <option value="opus">opus</option>
            <option value="sonnet">sonnet</option>
            <option value="haiku">haiku</option>
          </select>
        </label>
        <label>
          Amount (USD)
          <input id="limit-amount" inputMode="decimal" placeholder="e.g. 25.00" value={form.amount} onInput={(e) => set({ amount: e.currentTarget.value })} />
        </label>
        {pooledShown && (
          <label>
            Shared budget (USD, optional)
            <input id="limit-pooled" inputMode="decimal" placeholder="whole group" value={form.pooled} onInput={(e) => set({ pooled: e.currentTarget.value })} />
          </label>
        )}
      </fieldset>
      {error && (
        <p class="banner error" role="alert" data-testid="form-error">
          {error}
        </p>
      )}
      <div class="row">
        <button type="submit" id="limit-save" data-edit="save" disabled={!canEdit}>
          Review and save
        </button>
        <button type="button" class="secondary" disabled={!canEdit} onClick={() => setForm(EMPTY)}>
          Clear
        </button>
      </div>
    </form>
  );
}

export function LimitsPage() {
  const { canEdit, notify } = useConsole();
  const [scopeType, setScopeType] = useState('');
  const pages = usePages(scopeType);
  const read = useGet<Page<SpendLimit>>(`${ORG}/spend_limits${query({ limit: 50, scope_type: scopeType, after_id: pages.token })}`);
  const [form, setForm] = useState<Form>(EMPTY);
  const [review, setReview] = useState<LimitBody | null>(null);
  const [deleting, setDeleting] = useState<SpendLimit | null>(null);
  const [delBusy, setDelBusy] = useState(false);
  const [delError, setDelError] = useState<string | null>(null);
  const formRef = useRef<HTMLDivElement>(null);
  const limits = read.data?.data ?? [];
  const models = limits.some((l) => l.model);

  const focusForm = () => {
    formRef.current?.scrollIntoView({ behavior: 'smooth', block: 'start' });
    formRef.current?.querySelector<HTMLSelectElement>('#limit-scope-type')?.focus();
  };
  const edit = (l: SpendLimit) => {
    setForm({
      scopeType: l.scope.type,
      scopeId: l.scope.type === 'user' ? l.scope.user_id : l.scope.type === 'rbac_group' ? l.scope.rbac_group_id : '',
      period: l.period,
      model: l.model ?? '',
      amount: centsToDollars(l.amount),
      pooled: '',
    });
    focusForm();
  };
  const remove = async () => {
    if (!deleting) return;
    setDelBusy(true);
    setDelError(null);
    try {
      await call('DELETE', `${ORG}/spend_limits/${encodeURIComponent(deleting.id)}`);
      notify('ok', `Deleted the ${periodLabel(deleting.period).toLowerCase()} limit of ${scopeWords(deleting.scope)}.`);
      setDeleting(null);
      read.reload();
    } catch (e) {
      setDelError(errorText(e));
      notify('error', `Not deleted: ${errorText(e)}`);
    } finally {
      setDelBusy(false);
    }
  };

  return (
    <section class="stack" aria-labelledby="h-limits" data-page="limits">
      <div class="view-head">
        <h2 id="h-limits">Spend limits</h2>
        {!canEdit && <ReadOnlyBadge />}
      </div>
      <p class="muted">
        A limit caps what a person, each member of a group, or the organization as a whole may spend per period. A person
        is held to the tightest limit that applies to them.
      </p>
      {canEdit ? (
        <div ref={formRef}>
          <LimitForm form={form} setForm={setForm} onReview={setReview} canEdit={canEdit} />
        </div>
      ) : (
        <p class="banner info" data-testid="viewer-note">
          You can read the limits; only members of the admin groups can create, change or delete them.
        </p>
      )}
      {(limits.length > 0 || scopeType !== '' || pages.index > 0) && (
      <div class="toolbar">
        <label>
          Show
          <select value={scopeType} onChange={(e) => setScopeType(e.currentTarget.value)} data-testid="limits-filter">
            <option value="">Every scope</option>
            <option value="organization">Organization</option>
            <option value="rbac_group">Groups</option>
            <option value="user">People</option>
          </select>
        </label>
      </div>
      )}
      {read.error && <ErrorLine error={read.error} retry={read.reload} />}
      {read.loading && !read.data && <Loading what="spend limits" />}
      {read.data && limits.length === 0 && pages.index === 0 && (
        <Empty testid="no-limits">
          <p>
            No spend limits{scopeType ? ' of this kind' : ''} yet: nobody's spend is capped.
            {canEdit ? ' Start with a monthly limit for the organization, or a daily one per person.' : ' An admin can create them.'}
          </p>
          {canEdit && (
            <p>
              <button type="button" data-testid="create-limit" onClick={focusForm}>
                Create a spend limit
              </button>
            </p>
          )}
        </Empty>
      )}
      {limits.length > 0 && (
        <div class="scroll">
          <table class="dense fixed" data-testid="limits">
            <thead>
              <tr>
                <th scope="col" class="w-person">Applies to</th>
                <th scope="col">Period</th>
                {models && <th scope="col">Model</th>}
                <th scope="col" class="num">Amount</th>
                <th scope="col">Shared budget</th>
                <th scope="col">Updated</th>
                {canEdit && (
                  <th scope="col" class="w-actions-sm">
                    <span class="visually-hidden">Actions</span>
                  </th>
                )}
              </tr>
            </thead>
            <tbody>
              {limits.map((l) => (
                <tr key={l.id} data-limit={l.id} data-scope-type={l.scope.type}>
                  <td>
                    <ScopeCell scope={l.scope} />
                  </td>
                  <td>{periodLabel(l.period)}</td>
                  {models && <td>{modelName(l.model)}</td>}
                  <td class="num">{l.amount === null ? <span class="muted">no cap</span> : cents(l.amount)}</td>
                  <td>
                    {l.pooled_budget ? (
                      <>
                        {cents(l.pooled_budget.amount)} {l.pooled_budget.paused && <span class="badge warn">paused</span>}
                      </>
                    ) : (
                      <span class="muted">—</span>
                    )}
                  </td>
                  <td title={localTime(l.updated_at)}>{shortTime(l.updated_at)}</td>
                  {canEdit && (
                  <td class="actions">
                      <>
                        <button type="button" class="secondary compact" data-edit="edit" onClick={() => edit(l)}>
                          Change
                        </button>
                        <button
                          type="button"
                          class="secondary compact danger-text"
                          data-edit="delete"
                          onClick={() => {
                            setDelError(null);
                            setDeleting(l);
                          }}
                        >
                          Delete
                        </button>
                      </>
                  </td>
                  )}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <Pager pages={pages} nextToken={read.data?.has_more ? read.data.last_id : null} />
      {review && (
        <SaveWithPreview
          title="Save this spend limit?"
          body={review}
          onClose={() => setReview(null)}
          onSaved={() => {
            setReview(null);
            setForm(EMPTY);
            read.reload();
          }}
        />
      )}
      {deleting && (
        <ConfirmDialog
          title="Delete this spend limit?"
          confirmLabel="Delete"
          danger
          busy={delBusy}
          error={delError}
          onConfirm={() => void remove()}
          onCancel={() => setDeleting(null)}
        >
          <p>
            The {periodLabel(deleting.period).toLowerCase()} limit of {cents(deleting.amount)}
            {deleting.model ? ` (${deleting.model})` : ''} for <strong class="clip-inline">{scopeWords(deleting.scope)}</strong>{' '}
            is removed at once: spend it capped is then bound only by the other limits that apply.
            {deleting.pooled_budget ? ' Its shared budget goes with it.' : ''}
          </p>
        </ConfirmDialog>
      )}
    </section>
  );
}

export function ScopeCell({ scope }: { scope: Scope }): ComponentChildren {
  if (scope.type === 'user')
    return (
      <span class="person">
        <span class="muted small">Person</span>
        <a class="clip" href={`#people/${encodeURIComponent(scope.user_id)}`} title={scope.user_id}>
          {scope.user_id}
        </a>
      </span>
    );
  if (scope.type === 'rbac_group')
    return (
      <span class="person">
        <span class="muted small">Group</span>
        <span class="clip strong" title={scope.rbac_group_id}>
          {scope.rbac_group_id}
        </span>
      </span>
    );
  return <span class="strong">Organization</span>;
}
