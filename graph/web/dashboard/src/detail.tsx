// The task detail view (#/task/<id>): the task as the `task(id)`
// subscription streams it until it ends — attempts, timings, error, result —
// its dependency graph (the whole batch when it has one), and the actions
// that apply to its state.

import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { json, ms, span, short } from './format';
import type { Ctx } from './main';
import { type Attempt, BATCH, type BatchInfo, TASK, TASK_SUB, type TaskDetail, TERMINAL } from './queries';
import { Time } from './time';

export function Detail({ ctx, id }: { ctx: Ctx; id: string }) {
  const [task, setTask] = useState<TaskDetail | null>(null);
  const [batch, setBatch] = useState<BatchInfo | null>(null);
  const [error, setError] = useState('');

  useEffect(() => {
    let live = true;
    setTask(null);
    setBatch(null);
    setError('');
    ctx.api
      .request<{ task: TaskDetail }>(TASK, { id })
      .then((d) => live && setTask(d.task))
      .catch((e: Error) => live && setError(e.message));
    const stop = ctx.api.subscribe<{ task: TaskDetail }>({
      query: TASK_SUB,
      variables: () => ({ id }),
      next: (d) => {
        if (!live) return;
        setTask(d.task);
        ctx.store.changed();
      },
      error: (e) => live && setError(e.message),
      complete: () => {},
    });
    return () => {
      live = false;
      stop();
    };
  }, [id]);

  // The batch's graph: read again when this task changes, and every two
  // seconds while the batch has tasks that have not ended.
  const batchId = task?.batchId ?? '';
  const changedAt = task?.updatedAt ?? '';
  const batchDone = batch?.done ?? false;
  useEffect(() => {
    if (!batchId) return;
    let live = true;
    const read = () =>
      ctx.api
        .request<{ batch: BatchInfo }>(BATCH, { id: batchId })
        .then((d) => live && setBatch(d.batch))
        .catch(() => {});
    void read();
    const timer = batchDone ? 0 : window.setInterval(read, 2000);
    return () => {
      live = false;
      window.clearInterval(timer);
    };
  }, [batchId, changedAt, batchDone]);

  return (
    <aside class="detail" id="detail" aria-label="task detail">
      <header>
        <h2>
          Task <span class="mono">{id}</span>
        </h2>
        <a class="close" href="#/" aria-label="close">
          ×
        </a>
      </header>
      {error ? <p class="error">{error}</p> : null}
      {task ? <Body ctx={ctx} task={task} batch={batch} /> : error ? null : <p class="dim">Loading…</p>}
    </aside>
  );
}

function Body({ ctx, task, batch }: { ctx: Ctx; task: TaskDetail; batch: BatchInfo | null }) {
  const { actions } = ctx;
  const ended = TERMINAL.has(task.state);
  const row = (k: string, v: unknown) =>
    v === null || v === undefined || v === '' ? null : (
      <tr key={k}>
        <th>{k}</th>
        <td>{v as ComponentChildren}</td>
      </tr>
    );
  return (
    <div>
      <p>
        <span class={`state badge big ${task.state}`} id="detail-state">
          {task.state}
        </span>{' '}
        {task.reason ? <span class="dim">{task.reason}</span> : null}
      </p>
      {task.hold ? (
        <p class="hold" id="detail-hold">
          <span class="badge HELD">held</span> {task.hold.reason}
        </p>
      ) : null}
      <div class="actions">
        {!ended ? (
          <button class="cancel" onClick={() => void actions.cancel(task.id)}>
            Cancel task
          </button>
        ) : null}
        {task.state === 'PARKED' ? (
          <button class="reset" onClick={() => void actions.reset(task.id)}>
            Reset (fresh attempt budget)
          </button>
        ) : null}
        {task.state === 'RETRY_WAIT' || (ended && task.state !== 'SUCCEEDED') ? (
          <button class="retry" onClick={() => void actions.retry(task.id)}>
            Retry now
          </button>
        ) : null}
        {task.session ? (
          <>
            <button class="stop-session" onClick={() => void actions.stopSession(task.session as string, false)}>
              Stop session
            </button>
            <button class="stop-session-all" onClick={() => void actions.stopSession(task.session as string, true)}>
              Stop session (all)
            </button>
          </>
        ) : null}
      </div>
      <table class="kv">
        <tbody>
          {row('agent', task.agentId)}
          {row('lane', task.lane)}
          {row('priority', task.priority)}
          {row('session', task.session)}
          {row('position', task.position)}
          {row(
            'held',
            task.hold ? (
              // No timer asks a pull lane's policy again: a worker's next
              // lease does, so its reaskAt (when a waiting lease looks
              // again) is no time to promise, and may lie in the past.
              ctx.store.lanes.some((l) => l.name === task.hold?.lane && l.pull) ? (
                <>
                  by {task.hold.policy} on pull lane {task.hold.lane} since <Time at={task.hold.since} />, asks again at
                  the next lease
                </>
              ) : (
                <>
                  by {task.hold.policy} on lane {task.hold.lane} since <Time at={task.hold.since} />
                  {task.hold.reaskAt ? (
                    <>
                      , asks again at <Time at={task.hold.reaskAt} />
                    </>
                  ) : (
                    ', asks again on the next change'
                  )}
                </>
              )
            ) : null,
          )}
          {row(
            'lease',
            task.lease ? (
              <span id="detail-lease">
                attempt {task.lease.attempt} leased by {task.lease.worker ?? 'a worker (resumed after a restart)'}
                {task.lease.leasedAt ? (
                  <>
                    {' '}
                    at <Time at={task.lease.leasedAt} />
                  </>
                ) : null}
                , expires <Time at={task.lease.expiresAt} /> unless renewed
              </span>
            ) : null,
          )}
          {row('action', task.action ? `${task.action.kind} ${task.action.selector ?? task.action.ref ?? ''} ${task.action.params ? JSON.stringify(task.action.params) : ''}` : null)}
          {row('instruction', task.instruction)}
          {row('instance', task.instanceId)}
          {row('tab', task.tabId)}
          {row('batch', task.batchId)}
          {row('parent', task.parentId)}
          {row('labels', task.labels.map((l) => `${l.key}=${l.value}`).join(' '))}
          {row('submitted', <Time at={task.submittedAt} />)}
          {row('queued', task.queuedAt ? <Time at={task.queuedAt} /> : null)}
          {row('next run', task.nextRunAt ? <Time at={task.nextRunAt} /> : null)}
          {row(
            'ended',
            task.endedAt ? (
              <>
                <Time at={task.endedAt} /> ({span(task.submittedAt, task.endedAt)} after submission)
              </>
            ) : null,
          )}
          {row('deadline', task.deadline ? <Time at={task.deadline} /> : null)}
          {row('timeout', task.timeoutMs ? ms(task.timeoutMs) : null)}
        </tbody>
      </table>
      <h3>Attempts ({task.attemptCount})</h3>
      {task.attempts.length === 0 ? (
        <p class="dim">None yet.</p>
      ) : (
        <table class="attempts">
          <thead>
            <tr>
              <th>#</th>
              <th>instance / tab</th>
              <th>assigned</th>
              <th title="from its dispatch to reaching its instance (– when it never reached one: a pull lane's attempt, or one that failed before)">reached</th>
              <th title="finding its tab before the action: a named or session tab, a pooled one or a new one">tab</th>
              <th title="the action at the instance, from sending it to the answer">action</th>
              <th>ran</th>
            </tr>
          </thead>
          {task.attempts.map((a) => (
            <AttemptRows key={a.n} a={a} />
          ))}
        </table>
      )}
      {task.error ? (
        <>
          <h3>Error ({task.errorClass})</h3>
          <pre class="bad">{task.error}</pre>
        </>
      ) : null}
      {task.result !== null && task.result !== undefined ? (
        <>
          <h3>Result</h3>
          <pre id="detail-result">{json(task.result)}</pre>
        </>
      ) : null}
      <h3>Dependencies</h3>
      <Graph ctx={ctx} task={task} batch={batch} />
      {task.children.length > 0 ? (
        <>
          <h3>Spawned tasks</h3>
          <ul class="log">
            {task.children.map((c) => (
              <li key={c.id}>
                <a href={`#/task/${c.id}`}>{short(c.id, 12)}</a> <span class={`badge ${c.state}`}>{c.state}</span>
              </li>
            ))}
          </ul>
        </>
      ) : null}
    </div>
  );
}

/**
 * AttemptRows is one attempt: a row of its timings under the table's header,
 * then, when it has one, a row of its outcome across the table (class,
 * instance fault, HTTP status, error code, error) that wraps, so that the
 * code and the error are always in view however narrow the panel.
 */
function AttemptRows({ a }: { a: Attempt }) {
  const failedClass = a.errorClass !== 'NONE';
  const outcome = failedClass || a.instanceFault || a.httpStatus !== null || a.errorCode || a.error;
  return (
    <tbody class="attempt" data-attempt={a.n}>
      <tr class="run">
        <td class="n">{a.n}</td>
        <td class="dim where" data-label="on">
          {a.instanceId ?? '–'} / {a.tabId ?? '–'}
        </td>
        <td class="mono" data-label="assigned">
          <Time at={a.assignedAt} />
        </td>
        <td class="reached" data-label="reached">
          {/* A pull lane's attempt goes to a worker, never to an instance. */}
          {a.instanceId && a.startedAt ? span(a.assignedAt, a.startedAt) : '–'}
        </td>
        <td class="tab-time" data-label="tab">
          {ms(a.tabTimeMs)}
        </td>
        <td class="action-time" data-label="action">
          {ms(a.actionTimeMs)}
        </td>
        <td class="ran" data-label="ran">
          {a.endedAt ? span(a.startedAt ?? a.assignedAt, a.endedAt) : 'running'}
        </td>
      </tr>
      {outcome ? (
        <tr class="outcome">
          <td />
          <td colSpan={6}>
            {failedClass ? <span class="error-class">{a.errorClass}</span> : null}
            {a.instanceFault ? (
              <span class="badge FAULT instance-fault" title="it ended because of its instance, not its task: it did not spend the task's retry budget">
                instance fault
              </span>
            ) : null}
            {a.httpStatus !== null ? <span class="http">HTTP {a.httpStatus}</span> : null}
            {a.errorCode ? (
              <span
                class="mono error-code"
                title="the error code the lane's retry policy was given: the executor's, a worker's failTask code, or Switchyard's own (timeout, lease_expired, restart, instance_fault)"
              >
                {a.errorCode}
              </span>
            ) : null}
            {a.error ? <span class="bad error">{a.error}</span> : null}
          </td>
        </tr>
      ) : null}
    </tbody>
  );
}

interface Node {
  id: string;
  state: string;
  deps: string[];
  layer: number;
  row: number;
}

const NW = 118;
const NH = 26;
const GX = 46;
const GY = 10;

/**
 * Graph draws the dependency DAG: the task's batch when it has one (up to
 * 200 tasks), else the task and its direct dependencies. Layers by longest
 * path from the roots, left to right; the selected task is outlined.
 */
function Graph({ ctx, task, batch }: { ctx: Ctx; task: TaskDetail; batch: BatchInfo | null }) {
  const nodes = new Map<string, Node>();
  const add = (id: string, state: string, deps: string[]) => {
    if (!nodes.has(id)) nodes.set(id, { id, state, deps, layer: -1, row: 0 });
  };
  if (batch) for (const n of batch.tasks.nodes) add(n.id, n.state, n.dependsOn);
  add(task.id, task.state, task.dependsOn);
  nodes.get(task.id)!.state = task.state;
  for (const d of task.dependencies) add(d.id, d.state ?? 'purged', []);
  if (nodes.size === 1 && task.dependsOn.length === 0) return <p class="dim">None: it depends on no task{task.batchId ? ' and its batch has no other' : ''}.</p>;

  const layerOf = (n: Node, seen: Set<string>): number => {
    if (n.layer >= 0) return n.layer;
    if (seen.has(n.id)) return 0; // cannot happen (the server refuses cycles); stay finite anyway
    seen.add(n.id);
    let l = 0;
    for (const d of n.deps) {
      const dn = nodes.get(d);
      if (dn) l = Math.max(l, layerOf(dn, seen) + 1);
    }
    n.layer = l;
    return l;
  };
  const rows: number[] = [];
  for (const n of nodes.values()) {
    layerOf(n, new Set());
    n.row = rows[n.layer] ?? 0;
    rows[n.layer] = n.row + 1;
  }
  const width = rows.length * (NW + GX) - GX + 4;
  const height = Math.max(...rows) * (NH + GY) - GY + 4;
  const pos = (n: Node) => ({ x: 2 + n.layer * (NW + GX), y: 2 + n.row * (NH + GY) });
  return (
    <div class="graph">
      <svg width={width} height={height} viewBox={`0 0 ${width} ${height}`} role="img" aria-label="dependency graph">
        {[...nodes.values()].flatMap((n) =>
          n.deps
            .filter((d) => nodes.has(d))
            .map((d) => {
              const a = pos(nodes.get(d)!);
              const b = pos(n);
              const x1 = a.x + NW;
              const y1 = a.y + NH / 2;
              const x2 = b.x;
              const y2 = b.y + NH / 2;
              return <path key={`${d}>${n.id}`} class="edge" d={`M${x1},${y1} C${x1 + GX / 2},${y1} ${x2 - GX / 2},${y2} ${x2},${y2}`} />;
            }),
        )}
        {[...nodes.values()].map((n) => {
          const p = pos(n);
          return (
            <g
              key={n.id}
              class={`node ${n.state} ${n.id === task.id ? 'self' : ''}`}
              transform={`translate(${p.x},${p.y})`}
              onClick={() => ctx.actions.open(n.id)}
            >
              <title>
                {n.id} {n.state}
              </title>
              <rect width={NW} height={NH} rx={4} />
              <text x={6} y={17}>
                {short(n.id, 8)} {n.state.slice(0, 4)}
              </text>
            </g>
          );
        })}
      </svg>
      {batch?.tasks.pageInfo.hasNextPage ? <p class="dim">The first 200 tasks of the batch are drawn.</p> : null}
    </div>
  );
}
