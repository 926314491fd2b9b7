// Policy blocks: what the gateway refused, by which layer, and the message the caller saw.

import type { Block, Dashboard } from '../api';
import { localTime, shortTime } from '../format';

const LAYER_LABEL: Record<Block['layer'], string> = {
  policy: 'Policy allowlist',
  catalog: 'Model catalog',
  webhook: 'Policy webhook',
  spend: 'Spend cap',
  paused: 'Paused',
  routing: 'Routing rule or override',
  rate_limit: 'Traffic limit',
  capability: 'Model capability',
};

export function BlocksView({ dash }: { dash: Dashboard }) {
  const blocks = dash.blocks ?? [];
  return (
    <section aria-labelledby="h-blocks">
      <h2 id="h-blocks">Policy blocks</h2>
      {!dash.detail ? (
        <p class="muted" data-testid="no-detail">
          Blocked requests are shown on this machine (loopback) or with an admin key.
        </p>
      ) : blocks.length === 0 ? (
        <p class="muted" data-testid="no-blocks">No request has been blocked since the gateway started.</p>
      ) : (
        <div class="scroll">
          <table data-testid="blocks">
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
              {blocks.map((b) => (
                <tr data-testid="block-row" data-layer={b.layer} key={`${b.request_id}-${b.at}`}>
                  <td class="time" title={`${localTime(b.at)} · request ${b.request_id}`}>{shortTime(b.at)}</td>
                  <td>
                    <span class={`badge layer-${b.layer}`} data-testid="block-layer">
                      {LAYER_LABEL[b.layer] ?? b.layer}
                    </span>
                  </td>
                  <td class="mono" data-testid="block-model">{b.model ?? '—'}</td>
                  <td class="num">{b.status}</td>
                  <td data-testid="block-message">{b.message}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
