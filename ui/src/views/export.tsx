// Export: the usage of a date range as a CSV or JSON file, per request or grouped, saved
// under the name the server gives it.

import { useState } from 'preact/hooks';

import { ApiFailure, type ExportGroup, type ExportQuery, downloadExport } from '../api';
import { localDay } from '../format';
import { WINDOW_DAYS } from './common';

const GROUPS: { id: ExportGroup; label: string }[] = [
  { id: 'raw', label: 'Every request' },
  { id: 'day', label: 'Per day' },
  { id: 'model', label: 'Per model' },
  { id: 'project', label: 'Per project' },
  { id: 'session', label: 'Per session' },
];

export function ExportForm({ token }: { token: string }) {
  const [q, setQ] = useState<ExportQuery>(() => ({
    since: localDay(-(WINDOW_DAYS - 1)),
    until: localDay(0),
    format: 'csv',
    group: 'raw',
  }));
  const [busy, setBusy] = useState(false);
  const [said, setSaid] = useState<{ kind: 'error' | 'ok'; text: string } | null>(null);
  const set = (part: Partial<ExportQuery>) => {
    setQ({ ...q, ...part });
    setSaid(null);
  };
  const submit = async (e: Event) => {
    e.preventDefault();
    if (q.since === '' || q.until === '') {
      setSaid({ kind: 'error', text: 'Choose both dates.' });
      return;
    }
    if (q.since > q.until) {
      setSaid({ kind: 'error', text: 'The first day comes after the last one.' });
      return;
    }
    setBusy(true);
    setSaid(null);
    try {
      const name = await downloadExport(token, q);
      setSaid({ kind: 'ok', text: `Downloaded ${name}.` });
    } catch (err) {
      const text = err instanceof ApiFailure ? err.message : 'the app did not answer';
      setSaid({ kind: 'error', text: `The export failed: ${text}` });
    } finally {
      setBusy(false);
    }
  };
  return (
    <section class="card stack export" aria-labelledby="h-export" data-testid="export">
      <div class="section-head">
        <h3 id="h-export">Export usage</h3>
        <p class="muted small">
          A CSV or JSON file of the usage between two days, both included. Requests outside any Claude Code
          session are in it too.
        </p>
      </div>
      <form class="row" noValidate onSubmit={(e) => void submit(e)}>
        <label>
          From
          <input
            type="date"
            required
            value={q.since}
            max={q.until || undefined}
            data-testid="export-since"
            onInput={(e) => set({ since: e.currentTarget.value })}
          />
        </label>
        <label>
          To (included)
          <input
            type="date"
            required
            value={q.until}
            min={q.since || undefined}
            data-testid="export-until"
            onInput={(e) => set({ until: e.currentTarget.value })}
          />
        </label>
        <label>
          Format
          <select
            value={q.format}
            data-testid="export-format"
            onChange={(e) => set({ format: e.currentTarget.value as ExportQuery['format'] })}
          >
            <option value="csv">CSV</option>
            <option value="json">JSON</option>
          </select>
        </label>
        <label>
          Rows
          <select
            value={q.group}
            data-testid="export-group"
            onChange={(e) => set({ group: e.currentTarget.value as ExportGroup })}
          >
            {GROUPS.map((g) => (
              <option value={g.id} key={g.id}>
                {g.label}
              </option>
            ))}
          </select>
        </label>
        <button type="submit" disabled={busy} data-testid="export-button">
          {busy ? 'Exporting…' : 'Download'}
        </button>
      </form>
      {said?.kind === 'error' && (
        <p class="error-text" role="alert" data-testid="export-error">
          {said.text}
        </p>
      )}
      {said?.kind === 'ok' && (
        <p class="muted small" role="status" data-testid="export-done">
          {said.text}
        </p>
      )}
    </section>
  );
}
