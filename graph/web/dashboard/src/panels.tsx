// The overview panels: counters, charts, lanes, agents, instances, and
// policies with their plugins. Each reads the store; actions go through the
// same GraphQL mutations a client would send.

import { LineChart } from './chart';
import { ms, num } from './format';
import type { Ctx } from './main';
import type { HeartbeatSample } from './queries';
import { AGENTS_SHOWN, HISTORY } from './store';
import { Time } from './time';

export function Tiles({ ctx }: { ctx: Ctx }) {
  const s = ctx.store.stats;
  const ended = (state: string) => s?.ended.find((c) => c.state === state)?.count ?? 0;
  const tile = (label: string, value: string, cls = '') => (
    <div class={`tile ${cls}`} key={label}>
      <div class="tile-value">{value}</div>
      <div class="tile-label">{label}</div>
    </div>
  );
  if (!s) return <section class="tiles">{tile('connecting…', '–')}</section>;
  return (
    <section class="tiles" id="tiles">
      {tile('in flight / ceiling', `${num(s.inFlight)} / ${num(s.maxInFlight)}`)}
      {tile('queued', num(s.pending))}
      {tile('submitted', num(s.submitted))}
      {tile('dispatched', num(s.dispatched))}
      {tile('succeeded', num(ended('SUCCEEDED')), 'ok')}
      {tile('failed', num(ended('FAILED')), ended('FAILED') > 0 ? 'bad' : '')}
      {tile('parked', num(ended('PARKED')), ended('PARKED') > 0 ? 'warn' : '')}
      {tile('rejected', num(s.rejected), s.rejected > 0 ? 'warn' : '')}
      {tile('dispatch p99', ms(s.dispatchLatency.p99Ms))}
      {tile('last seq', String(s.lastSeq))}
      {s.draining ? tile('engine', 'DRAINING', 'bad') : null}
    </section>
  );
}

export function Charts({ ctx }: { ctx: Ctx }) {
  const xs = ctx.store.samples;
  return (
    <section class="charts">
      <LineChart
        id="chart-throughput"
        title="Throughput (tasks/s)"
        capacity={HISTORY}
        series={[
          { name: 'submitted', color: '#7c8aa5', values: xs.map((p) => p.submitted) },
          { name: 'dispatched', color: '#2f6fde', values: xs.map((p) => p.dispatched) },
          { name: 'ended', color: '#1f9d55', values: xs.map((p) => p.ended) },
        ]}
      />
      <LineChart
        id="chart-latency"
        title="Dispatch latency (queued → dispatched)"
        capacity={HISTORY}
        series={[
          { name: 'p50', color: '#2f6fde', values: xs.map((p) => p.p50), format: ms },
          { name: 'p99', color: '#d9822b', values: xs.map((p) => p.p99), format: ms },
        ]}
      />
    </section>
  );
}

function Bar({ value, max, label }: { value: number; max: number; label: string }) {
  const f = max > 0 ? Math.min(1, value / max) : value > 0 ? 1 : 0;
  return (
    <div class="bar" title={label}>
      <div class={`bar-fill ${f >= 1 ? 'full' : ''}`} style={{ width: `${(f * 100).toFixed(1)}%` }} />
      <span class="bar-label">{label}</span>
    </div>
  );
}

export function Lanes({ ctx }: { ctx: Ctx }) {
  const { store, actions } = ctx;
  return (
    <section class="panel" id="lanes">
      <h2>Lanes</h2>
      <table>
        <thead>
          <tr>
            <th>lane</th>
            <th>in flight / ceiling</th>
            <th>queued / cap</th>
            <th>state</th>
            <th>ceiling</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {store.lanes.map((l) => (
            <tr key={l.name} data-lane={l.name} class={l.paused ? 'paused' : ''}>
              <td class="name" title={`selection ${l.selectionPolicy}, retry ${l.retryPolicyName}, ${l.dropPolicy.toLowerCase()} when full`}>
                {l.name}
              </td>
              <td>
                <Bar value={l.inFlight} max={l.maxInFlight} label={`${l.inFlight} / ${l.maxInFlight}`} />
              </td>
              <td>
                <Bar value={l.pending} max={l.maxQueued} label={`${num(l.pending)} / ${num(l.maxQueued)}`} />
              </td>
              <td>
                <span class={`lane-state badge ${l.paused ? 'PAUSED' : 'ACTIVE'}`}>{l.paused ? 'paused' : 'running'}</span>
                {l.pull ? (
                  <>
                    {' '}
                    <span class="lane-pull badge PULL" title="a pull lane: workers lease its tasks (leaseTasks); no browser instance runs them">
                      pull
                    </span>
                  </>
                ) : null}
              </td>
              <td>
                <form
                  class="limit"
                  onSubmit={(e) => {
                    e.preventDefault();
                    const input = (e.currentTarget as HTMLFormElement).elements.namedItem('max') as HTMLInputElement;
                    const v = Number(input.value);
                    if (Number.isInteger(v) && v >= 0) void actions.updateLane(l.name, { maxInFlight: v });
                  }}
                >
                  <input
                    key={`${l.name}:${l.maxInFlight}`}
                    name="max"
                    type="number"
                    min={0}
                    defaultValue={String(l.maxInFlight)}
                    aria-label={`ceiling of lane ${l.name}`}
                  />
                  <button type="submit" class="set-limit">
                    set
                  </button>
                </form>
              </td>
              <td>
                <button
                  class={l.paused ? 'resume' : 'pause'}
                  onClick={() => void actions.updateLane(l.name, { paused: !l.paused })}
                >
                  {l.paused ? 'Resume' : 'Pause'}
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {store.overviewError ? <p class="error">{store.overviewError}</p> : null}
    </section>
  );
}

export function Agents({ ctx }: { ctx: Ctx }) {
  const all = ctx.store.agents;
  const busy = ctx.store.busiest;
  return (
    <section class="panel" id="agents">
      <h2>
        Agents <span class="dim">{all.length > AGENTS_SHOWN ? `(the busiest ${AGENTS_SHOWN} of ${all.length})` : ''}</span>
      </h2>
      <table>
        <thead>
          <tr>
            <th>agent</th>
            <th>in flight</th>
            <th>queued</th>
            <th>dispatched / min</th>
            <th>share of the last minute</th>
          </tr>
        </thead>
        <tbody>
          {busy.map((a) => (
            <tr key={a.id} data-agent={a.id}>
              <td class="name">
                <a href={`#/?agent=${encodeURIComponent(a.id)}`} onClick={(e) => { e.preventDefault(); ctx.actions.filterFeed({ agentId: a.id }); }}>
                  {a.id}
                </a>
              </td>
              <td>
                {a.inFlight} / {a.maxInFlight}
              </td>
              <td>{num(a.pending)}</td>
              <td>{num(a.dispatchedLastMinute)}</td>
              <td>
                <Bar value={a.share} max={1} label={`${(a.share * 100).toFixed(1)}%`} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {/* The agents come with the lanes: their error (say, no token yet) is theirs too. */}
      {ctx.store.overviewError ? (
        <p class="error">{ctx.store.overviewError}</p>
      ) : all.length === 0 ? (
        <p class="dim">No agent has submitted work yet.</p>
      ) : null}
    </section>
  );
}

export function Instances({ ctx }: { ctx: Ctx }) {
  const list = [...ctx.store.instances.values()].sort((a, b) => (a.id < b.id ? -1 : 1));
  return (
    <section class="panel" id="instances">
      <h2>Instances</h2>
      <table>
        <thead>
          <tr>
            <th>instance</th>
            <th>kind</th>
            <th>health</th>
            <th>latency</th>
            <th>load</th>
            <th>tabs</th>
            <th>last check</th>
          </tr>
        </thead>
        <tbody>
          {list.map((i) => (
            <tr key={i.id} data-instance={i.id}>
              <td class="name" title={i.url}>
                {i.id}
              </td>
              <td class="dim">{i.kind}</td>
              <td>
                <span class={`badge ${i.health}`} title={i.lastError ?? ''}>
                  {i.health}
                  {i.failures > 0 ? ` (${i.failures})` : ''}
                </span>
              </td>
              <td>{i.health === 'HEALTHY' ? ms(i.latencyMs) : '–'}</td>
              <td>
                <Bar value={i.inFlight} max={i.capacity} label={i.capacity > 0 ? `${i.inFlight} / ${i.capacity}` : `${i.inFlight} / ∞`} />
              </td>
              <td>{i.tabs}</td>
              <td class="dim">
                <Time at={i.lastCheck} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {ctx.store.overviewError ? (
        <p class="error">{ctx.store.overviewError}</p>
      ) : list.length === 0 ? (
        <p class="dim">No browser instance is registered.</p>
      ) : null}
      {ctx.store.instanceLog.length > 0 ? (
        <ul class="log">
          {ctx.store.instanceLog.slice(0, 5).map((e) => (
            <li key={e.seq}>
              <Time class="dim" at={e.at} /> {e.instance.id} <span class={`badge ${e.kind}`}>{e.kind}</span> {e.reason ?? ''}
            </li>
          ))}
        </ul>
      ) : null}
    </section>
  );
}

export function Policies({ ctx }: { ctx: Ctx }) {
  const { policies, plugins, pluginsError, pluginLog } = ctx.store;
  return (
    <section class="panel" id="policies">
      <h2>Policies and plugins</h2>
      <table>
        <thead>
          <tr>
            <th>slot</th>
            <th>scope</th>
            <th>policy</th>
          </tr>
        </thead>
        <tbody>
          {policies.map((p) => (
            <tr key={`${p.slot}/${p.lane ?? ''}`} data-slot={p.slot} data-lane={p.lane ?? ''}>
              <td>{p.slot}</td>
              <td class="dim">{p.lane ? `lane ${p.lane}` : 'global'}</td>
              <td class="name">{p.name}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {plugins && plugins.length > 0 ? (
        <table class="plugins">
          <thead>
            <tr>
              <th>policy</th>
              <th>slot</th>
              <th>kind</th>
              <th>state</th>
              <th>in use</th>
              <th>calls</th>
              <th>faults</th>
              <th title="decisions answered by the native fallback, by cause: a fault, the breaker (quarantined or disabled), closed, rebuilding an instance, details too large">fallbacks</th>
              <th title="calls the watchdog let run past their deadline because the server was starved of CPU, not because the plugin was slow">graces</th>
              <th title="fairness decisions that held: nothing dispatched from the queues asked about until the plugin is asked again">holds</th>
              <th>p50 / p99</th>
            </tr>
          </thead>
          <tbody>
            {plugins.map((p) => (
              <tr key={p.name} data-plugin={p.name}>
                <td class="name">{p.name}</td>
                <td class="dim">{p.slot}</td>
                <td class="dim">{p.native ? 'native' : p.builtin ? 'built-in wasm' : 'wasm'}</td>
                <td>
                  <span class={`badge ${p.state}`} title={p.disabledReason ?? ''}>
                    {p.state}
                  </span>
                </td>
                <td class="dim">{p.activeIn.join(', ') || '–'}</td>
                <td>{num(p.calls)}</td>
                <td class={p.faults > 0 ? 'bad' : ''}>{num(p.faults)}</td>
                <td class="fallbacks">
                  {num(p.fallbacks)}
                  {p.fallbacksByCause.length > 0 ? (
                    <span class="dim causes">
                      {' '}
                      ({p.fallbacksByCause.map((c) => `${c.cause.toLowerCase().replace('_', '-')} ${num(c.count)}`).join(', ')})
                    </span>
                  ) : null}
                </td>
                <td class={p.deadlineGraces > 0 ? 'warn graces' : 'graces'}>{num(p.deadlineGraces)}</td>
                <td class={p.holds > 0 ? 'warn' : ''}>{num(p.holds)}</td>
                <td title={p.p50Us === null ? 'no decision timed yet' : undefined}>
                  {p.p50Us === null || p.p99Us === null ? '–' : `${p.p50Us.toFixed(1)} / ${p.p99Us.toFixed(1)} µs`}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : (
        <p class="dim">{pluginsError ? `Plugins: ${pluginsError}` : 'No plugin is loaded.'}</p>
      )}
      {plugins?.some((p) => p.disabledReason) ? (
        <ul class="log">
          {plugins
            .filter((p) => p.disabledReason)
            .map((p) => (
              <li key={p.name}>
                <span class="name">{p.name}</span> disabled: <span class="bad">{p.disabledReason}</span>
              </li>
            ))}
        </ul>
      ) : null}
      {pluginLog.length > 0 ? (
        <ul class="log" id="plugin-log">
          {pluginLog.slice(0, 6).map((e) => (
            <li key={e.seq}>
              <Time class="dim" at={e.at} /> <span class={`badge ${e.kind}`}>{e.kind}</span> {e.plugin ?? ''}
              {e.slot ? ` ${e.slot}` : ''}
              {e.lane ? ` lane ${e.lane}` : ''} <span class={e.kind === 'FAULT' || e.kind === 'DISABLED' ? 'bad' : 'dim'}>{e.reason ?? ''}</span>
            </li>
          ))}
        </ul>
      ) : null}
    </section>
  );
}

/** A latency sparkline of a check's latest probes; failed probes are red dots. */
function Spark({ samples }: { samples: HeartbeatSample[] }) {
  const W = 120;
  const H = 24;
  if (samples.length === 0) return <span class="dim">–</span>;
  const max = Math.max(1, ...samples.map((s) => s.latencyMs));
  const x = (i: number) => (samples.length === 1 ? W / 2 : (W * i) / (samples.length - 1));
  const y = (v: number) => H - 2 - ((H - 4) * v) / max;
  const points = samples.map((s, i) => `${x(i).toFixed(1)},${y(s.latencyMs).toFixed(1)}`).join(' ');
  return (
    <svg class="spark" width={W} height={H} viewBox={`0 0 ${W} ${H}`} role="img" aria-label={`latency, up to ${ms(max)}`}>
      <polyline points={points} fill="none" stroke="#1d4fa8" stroke-width="1.5" />
      {samples.map((s, i) => (s.ok ? null : <circle key={i} cx={x(i)} cy={y(s.latencyMs)} r="2.5" fill="#9b2424" />))}
    </svg>
  );
}

export function Heartbeats({ ctx }: { ctx: Ctx }) {
  const { heartbeats, heartbeatsError, heartbeatLog } = ctx.store;
  return (
    <section class="panel" id="heartbeats">
      <h2>Heartbeat checks</h2>
      {heartbeatsError ? <p class="dim">Heartbeat checks: {heartbeatsError}</p> : null}
      {heartbeats && heartbeats.length > 0 ? (
        <table>
          <thead>
            <tr>
              <th>check</th>
              <th>state</th>
              <th>latency</th>
              <th>p50</th>
              <th>uptime</th>
              <th>last probe</th>
            </tr>
          </thead>
          <tbody>
            {heartbeats.map((c) => (
              <tr key={c.id} data-check={c.id}>
                <td class="name" title={c.url}>
                  {c.name}
                </td>
                <td>
                  <span class={`badge ${c.state}`} title={`since ${c.since}`}>
                    {c.enabled ? c.state : `${c.state} (disabled)`}
                  </span>
                </td>
                <td>
                  <Spark samples={c.history} />
                </td>
                <td>{c.latencyP50Ms === null ? '–' : ms(c.latencyP50Ms)}</td>
                <td>{c.uptime === null ? '–' : `${(100 * c.uptime).toFixed(1)} %`}</td>
                <td class="dim">{c.lastProbeAt ? <Time at={c.lastProbeAt} /> : 'never'}</td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : heartbeats ? (
        <p class="dim">No heartbeat check: createHeartbeatCheck makes one.</p>
      ) : null}
      {heartbeatLog.length > 0 ? (
        <ul class="log">
          {heartbeatLog.slice(0, 5).map((e) => (
            <li key={e.seq}>
              <Time class="dim" at={e.at} /> {e.name} <span class={`badge ${e.to}`}>{e.to}</span> {e.sample.error ?? ''}
            </li>
          ))}
        </ul>
      ) : null}
    </section>
  );
}
