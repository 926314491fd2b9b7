// Policies (read-only): the managed settings the gateway serves at /managed/settings,
// each with whom it matches, and "what does a person receive".

import { useState } from 'preact/hooks';

import { ApiError, ORG, type Policy, type PolicyPreview, errorText, get, query } from '../api';
import { useGet } from '../hooks';
import { Empty, ErrorLine, Groups, JsonTree, Loading } from '../ui';

function pretty(v: unknown): string {
  try {
    return JSON.stringify(v, null, 2) ?? 'null';
  } catch {
    return String(v);
  }
}

export function PoliciesPage() {
  const read = useGet<{ data: Policy[]; policy_mode?: string }>(`${ORG}/policies`);
  const list = read.data?.data ?? [];
  return (
    <section class="stack" aria-labelledby="h-policies" data-page="policies">
      <div class="view-head">
        <h2 id="h-policies">Policies</h2>
        {read.data?.policy_mode && <span class="chip">mode: {read.data.policy_mode.replace('_', ' ')}</span>}
      </div>
      <p class="muted">
        Managed settings Claude Code fetches from the gateway (<code>/managed/settings</code>). They are set in the gateway's
        configuration; this page shows them and what a given person receives.
      </p>
      <PolicyPreviewForm />
      {read.error && <ErrorLine error={read.error} retry={read.reload} />}
      {read.loading && !read.data && <Loading what="policies" />}
      {read.data && list.length === 0 && (
        <Empty testid="no-policies">
          <p>
            No managed policy is configured, so Claude Code receives no managed settings from this gateway. Add
            <code> managed_settings</code> entries to the gateway's configuration to push settings to people by group or
            email domain.
          </p>
        </Empty>
      )}
      {list.map((p) => {
        const groups = p.match?.groups ?? [];
        const domains = p.match?.email_domains ?? [];
        return (
          <div class="card stack policy" key={p.index} data-policy={p.index}>
            <h3>
              Policy {p.index + 1}
              {groups.length === 0 && domains.length === 0 && <span class="chip">everyone</span>}
            </h3>
            <dl class="facts">
              <dt>Groups</dt>
              <dd>{groups.length ? <Groups groups={groups} /> : <span class="muted">any</span>}</dd>
              <dt>Email domains</dt>
              <dd>{domains.length ? <Groups groups={domains} /> : <span class="muted">any</span>}</dd>
              <dt>Checksum</dt>
              <dd class="mono wrap-text">{p.checksum}</dd>
              <dt>ETag</dt>
              <dd class="mono wrap-text">{p.etag}</dd>
            </dl>
            <details open={list.length <= 3}>
              <summary>Settings</summary>
              <pre class="code json-pre">{pretty(p.settings)}</pre>
            </details>
          </div>
        );
      })}
    </section>
  );
}

function PolicyPreviewForm() {
  const [user, setUser] = useState('');
  const [busy, setBusy] = useState(false);
  const [result, setResult] = useState<{ ok: true; v: PolicyPreview } | { ok: false; error: string } | null>(null);
  const run = async (e: Event) => {
    e.preventDefault();
    const id = user.trim();
    if (!id) {
      setResult({ ok: false, error: 'Enter a user id.' });
      return;
    }
    setBusy(true);
    try {
      const v = await get<PolicyPreview>(`${ORG}/policies/preview${query({ user_id: id })}`);
      setResult({ ok: true, v });
    } catch (err) {
      setResult({
        ok: false,
        error: err instanceof ApiError && err.status === 404 ? `Nobody with the id “${id}” is in the directory (they have not signed in yet).` : errorText(err),
      });
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="card stack" onSubmit={(e) => void run(e)} noValidate data-testid="policy-form">
      <h3>What does a person receive?</h3>
      <div class="row">
        <label class="grow">
          User id
          <input id="policy-user" placeholder="e.g. alice" value={user} onInput={(e) => setUser(e.currentTarget.value)} />
        </label>
        <button type="submit" id="policy-preview" disabled={busy}>
          {busy ? 'Looking…' : 'Show their settings'}
        </button>
      </div>
      <div id="policy-result" aria-live="polite">
        {result && !result.ok && (
          <p class="banner error" role="alert">
            {result.error}
          </p>
        )}
        {result && result.ok && (
          <div class="stack">
            <p>
              {result.v.matched.length === 0
                ? 'No policy matches this person: they receive no managed settings.'
                : `Matched ${result.v.matched.map((i) => `policy ${i + 1}`).join(', ')}.`}
              {result.v.etag ? <span class="muted small mono"> ETag {result.v.etag}</span> : null}
            </p>
            {result.v.user && (
              <details>
                <summary>The person, as the directory knows them</summary>
                <div class="json-box">
                  <JsonTree value={result.v.user} />
                </div>
              </details>
            )}
            <h4>Settings they receive</h4>
            <pre class="code json-pre" data-testid="policy-settings">{pretty(result.v.settings)}</pre>
          </div>
        )}
      </div>
    </form>
  );
}
