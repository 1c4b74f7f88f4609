// The live task feed: one row per task, updated in place as its events
// arrive over taskEventFeed, newest tasks first, at most FEED_SHOWN rows
// rendered. Agent, lane, session and batch filters are sent to the server
// (the feed restarts a little back in time with them); the state filter
// applies here, to the rows' current state.

import { num, short } from './format';
import type { Ctx } from './main';
import { STATES, TERMINAL } from './queries';
import { Time } from './time';
import { FEED_CAP, FEED_SHOWN, type FeedFilter } from './store';

export function Feed({ ctx }: { ctx: Ctx }) {
  const { store, actions } = ctx;
  const rows = store.visibleRows();
  const f = store.filter;
  return (
    <section class="panel feed" id="feed">
      <h2>
        Tasks, live{' '}
        <span class="dim">
          {num(store.eventRate)} events/s · {store.rows.size} tasks kept (max {FEED_CAP}), {Math.min(rows.length, FEED_SHOWN)} shown
          {store.feedAfter !== null ? ` · after seq ${store.feedAfter}` : ''}
        </span>
      </h2>
      <form
        class="filters"
        onSubmit={(e) => {
          e.preventDefault();
          const form = e.currentTarget as HTMLFormElement;
          const val = (n: string) => ((form.elements.namedItem(n) as HTMLInputElement | null)?.value ?? '').trim();
          actions.filterFeed({ agentId: val('agentId'), lane: val('lane'), sessionKey: val('sessionKey'), batchId: val('batchId') });
        }}
      >
        {(['agentId', 'lane', 'sessionKey', 'batchId'] as (keyof FeedFilter)[]).map((k) => (
          <input key={`${k}:${f[k]}`} name={k} placeholder={k} defaultValue={f[k]} aria-label={`filter by ${k}`} />
        ))}
        <select
          name="state"
          aria-label="filter by state"
          value={f.state}
          onChange={(e) => actions.filterState((e.currentTarget as HTMLSelectElement).value)}
        >
          <option value="">any state</option>
          <option value="LIVE">not ended</option>
          {STATES.map((s) => (
            <option key={s} value={s}>
              {s}
            </option>
          ))}
        </select>
        <button type="submit">Apply</button>
        <button type="button" onClick={() => actions.filterFeed({ agentId: '', lane: '', sessionKey: '', batchId: '' })}>
          Clear
        </button>
        <label class="pause-feed">
          <input
            type="checkbox"
            checked={store.feedPaused}
            onChange={(e) => actions.pauseFeed((e.currentTarget as HTMLInputElement).checked)}
          />{' '}
          freeze
        </label>
      </form>
      {store.lagged > 0 ? (
        <p class="warn lagged">
          This page fell behind and skipped {num(store.lagged)} events (LAGGED): the rows may be out of date.
        </p>
      ) : null}
      <table class="tasks">
        <thead>
          <tr>
            <th>task</th>
            <th>state</th>
            <th>agent</th>
            <th>lane</th>
            <th>session</th>
            <th>att.</th>
            <th>updated</th>
            <th>reason</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {rows.map((r) => (
            <tr key={r.id} data-task={r.id} data-state={r.state} onClick={() => actions.open(r.id)}>
              <td class="mono" title={r.id}>
                <a href={`#/task/${r.id}`} onClick={(e) => e.stopPropagation()}>
                  {short(r.id, 12)}
                </a>
              </td>
              <td>
                <span class={`state badge ${r.state}`}>{r.state || '…'}</span>
              </td>
              <td title={r.agentId}>{r.agentId}</td>
              <td title={r.lane}>{r.lane}</td>
              <td class="dim" title={r.sessionKey ?? ''}>
                {r.sessionKey}
              </td>
              <td>{r.attempt || ''}</td>
              <td class="dim mono">
                <Time at={r.at} />
              </td>
              <td class="dim reason" title={r.reason}>
                {r.reason}
              </td>
              <td>
                {r.state !== '' && !TERMINAL.has(r.state) ? (
                  <button
                    class="cancel"
                    onClick={(e) => {
                      e.stopPropagation();
                      void actions.cancel(r.id);
                    }}
                  >
                    Cancel
                  </button>
                ) : null}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {rows.length === 0 ? <p class="dim empty">No task events yet{store.serverFilter() ? ' for this filter' : ''}.</p> : null}
    </section>
  );
}
