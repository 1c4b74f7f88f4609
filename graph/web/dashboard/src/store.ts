// The dashboard's state, fed by subscriptions and queries, and the one
// scheduler that turns changes into DOM updates: however many events arrive,
// the page renders at most once per animation frame, and the task feed keeps
// a bounded number of rows. At 1k events/s that is a few cheap map updates
// per event and one render per frame.

import type {
  Agent,
  FeedEvent,
  HeartbeatCheck,
  HeartbeatEvent,
  Instance,
  InstanceEvent,
  Lane,
  Plugin,
  PluginEvent,
  PolicyAssignment,
  Stats,
  TaskState,
} from './queries';
import { TERMINAL } from './queries';

/** One task of the live feed: its latest known state. */
export interface FeedRow {
  id: string;
  agentId: string;
  lane: string;
  sessionKey: string;
  batchId: string;
  state: TaskState | '';
  attempt: number;
  reason: string;
  firstSeq: number;
  lastSeq: number;
  at: string;
  /** When the row last changed (performance.now()), to flash it. */
  touched: number;
}

/** A point of the charts: rates and latency over one stats interval. */
export interface Sample {
  t: number; // ms since epoch
  submitted: number; // per second
  dispatched: number;
  ended: number;
  p50: number | null; // dispatch latency over the interval, ms
  p99: number | null;
  inFlight: number;
  pending: number;
}

/** Filters of the feed: agent, lane, session and batch go to the server; state stays here. */
export interface FeedFilter {
  agentId: string;
  lane: string;
  sessionKey: string;
  batchId: string;
  state: string; // '' (any), 'LIVE' (not terminal), or a TaskState
}

export const FEED_CAP = 500; // rows kept
export const FEED_SHOWN = 100; // rows rendered
export const HISTORY = 120; // chart points (2 minutes at 1 s)
/** How far back the feed starts on load or after a filter change. */
export const BACKFILL = 1000;
/** Agents shown in the agents panel. */
export const AGENTS_SHOWN = 15;
/** The shortest time between two renders. */
export const MIN_RENDER_MS = 100;

export class Store {
  stats: Stats | null = null;
  prevStats: Stats | null = null;
  samples: Sample[] = [];
  lanes: Lane[] = [];
  agents: Agent[] = [];
  /** The AGENTS_SHOWN busiest agents, sorted once per overview read (there may be thousands). */
  busiest: Agent[] = [];
  instances = new Map<string, Instance>();
  instanceLog: InstanceEvent[] = [];
  policies: PolicyAssignment[] = [];
  plugins: Plugin[] | null = null;
  /** Recent plugin events, newest first: loads, policy changes, faults, breakers. */
  pluginLog: PluginEvent[] = [];
  pluginsError = '';
  heartbeats: HeartbeatCheck[] | null = null;
  heartbeatsError = '';
  heartbeatLog: HeartbeatEvent[] = [];
  overviewError = '';
  version = '';

  rows = new Map<string, FeedRow>();
  /** The seq of the last event consumed: the feed resumes after it. */
  feedAfter: number | null = null;
  lagged = 0;
  feedPaused = false;
  filter: FeedFilter = { agentId: '', lane: '', sessionKey: '', batchId: '', state: '' };
  /** Events per second, measured here over the last few seconds. */
  eventRate = 0;
  private rateWindow: { t: number; n: number }[] = [];
  /** A LANE or ENGINE event arrived: the overview should be read again. */
  laneChanged = false;

  private frame = 0;
  private timer = 0;
  private lastRender = 0;
  private readonly listeners = new Set<() => void>();

  /** Registers a render function, called at most once per animation frame. */
  listen(fn: () => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /**
   * Schedules a render on an animation frame, once however often called,
   * and at most every MIN_RENDER_MS: a person cannot read a table that
   * changes sixty times a second, and the page stays responsive to input
   * while events pour in.
   */
  changed(): void {
    if (this.frame !== 0 || this.timer !== 0) return;
    const wait = this.lastRender + MIN_RENDER_MS - performance.now();
    const schedule = () => {
      this.timer = 0;
      this.frame = requestAnimationFrame(() => {
        this.frame = 0;
        this.lastRender = performance.now();
        for (const fn of this.listeners) fn();
      });
    };
    if (wait > 0) this.timer = window.setTimeout(schedule, wait);
    else schedule();
  }

  onStats(s: Stats): void {
    const prev = this.stats;
    this.prevStats = prev;
    this.stats = s;
    if (prev) {
      const dt = (Date.parse(s.at) - Date.parse(prev.at)) / 1000;
      if (dt > 0) {
        const lat = intervalPercentiles(prev.dispatchLatency.buckets, s.dispatchLatency.buckets);
        this.samples.push({
          t: Date.parse(s.at),
          submitted: Math.max(0, s.submitted - prev.submitted) / dt,
          dispatched: Math.max(0, s.dispatched - prev.dispatched) / dt,
          ended: Math.max(0, sum(s.ended) - sum(prev.ended)) / dt,
          p50: lat ? lat.p50 : null,
          p99: lat ? lat.p99 : null,
          inFlight: s.inFlight,
          pending: s.pending,
        });
        if (this.samples.length > HISTORY) this.samples.splice(0, this.samples.length - HISTORY);
      }
    }
    this.changed();
  }

  onOverview(o: { lanes: Lane[]; agents: Agent[]; instances: Instance[]; policies: PolicyAssignment[] }): void {
    this.lanes = o.lanes;
    this.agents = o.agents;
    this.busiest = [...o.agents]
      .sort((a, b) => b.inFlight - a.inFlight || b.pending - a.pending || b.dispatchedLastMinute - a.dispatchedLastMinute || (a.id < b.id ? -1 : 1))
      .slice(0, AGENTS_SHOWN);
    this.policies = o.policies;
    this.instances = new Map(o.instances.map((i) => [i.id, i]));
    this.overviewError = '';
    this.changed();
  }

  onLane(l: Lane): void {
    this.lanes = this.lanes.map((x) => (x.name === l.name ? l : x));
    this.changed();
  }

  onInstanceEvent(e: InstanceEvent): void {
    if (e.kind === 'REMOVED') this.instances.delete(e.instance.id);
    else this.instances.set(e.instance.id, e.instance);
    this.instanceLog.unshift(e);
    if (this.instanceLog.length > 20) this.instanceLog.length = 20;
    this.changed();
  }

  onHeartbeatEvent(e: HeartbeatEvent): void {
    this.heartbeatLog.unshift(e);
    if (this.heartbeatLog.length > 20) this.heartbeatLog.length = 20;
    this.laneChanged = true; // read the checks again
    this.changed();
  }

  onPluginEvent(e: PluginEvent): void {
    this.pluginLog.unshift(e);
    if (this.pluginLog.length > 20) this.pluginLog.length = 20;
    this.laneChanged = true; // read the policies and plugins again
    this.changed();
  }

  /** Applies a message of taskEventFeed. */
  onEvents(events: FeedEvent[], lastSeq: number): void {
    const now = performance.now();
    for (const e of events) {
      switch (e.kind) {
        case 'LAGGED':
          this.lagged += e.skipped ?? 0;
          break;
        case 'LANE':
        case 'ENGINE':
          this.laneChanged = true;
          break;
        default:
          if (e.taskId) this.apply(e, now);
      }
    }
    if (this.feedAfter === null || lastSeq > this.feedAfter) this.feedAfter = lastSeq;
    this.countRate(events.length, now);
    this.changed();
  }

  private apply(e: FeedEvent, now: number): void {
    const id = e.taskId as string;
    let row = this.rows.get(id);
    if (!row) {
      row = {
        id,
        agentId: e.agentId ?? '',
        lane: e.lane ?? '',
        sessionKey: e.sessionKey ?? '',
        batchId: e.batchId ?? '',
        state: '',
        attempt: 0,
        reason: '',
        firstSeq: e.seq,
        lastSeq: e.seq,
        at: e.at,
        touched: now,
      };
      this.rows.set(id, row);
      if (this.rows.size > FEED_CAP) {
        // Maps iterate in insertion order: the first key is the oldest row.
        const oldest = this.rows.keys().next().value;
        if (oldest !== undefined) this.rows.delete(oldest);
      }
    }
    if (e.seq < row.lastSeq) return; // replayed after a reconnect
    row.lastSeq = e.seq;
    row.at = e.at;
    row.touched = now;
    if (e.kind === 'STATE' && e.to) row.state = e.to;
    if (e.attempt) row.attempt = e.attempt;
    // RELEASED and STALE say why a slot was freed or a completion ignored,
    // not why the task is in its state: the row keeps the task's reason,
    // as task(id) shows it.
    if (e.kind === 'RELEASED' || e.kind === 'STALE') return;
    if (e.reason !== undefined) row.reason = e.reason;
    else if (e.kind === 'STATE') row.reason = '';
  }

  private countRate(n: number, now: number): void {
    this.rateWindow.push({ t: now, n });
    while (this.rateWindow.length > 0 && now - this.rateWindow[0]!.t > 3000) this.rateWindow.shift();
    const total = this.rateWindow.reduce((a, b) => a + b.n, 0);
    this.eventRate = total / 3;
  }

  /** The server-side part of the filter, as a TaskEventFilter (null: none). */
  serverFilter(): Record<string, string> | null {
    const f: Record<string, string> = {};
    if (this.filter.agentId) f['agentId'] = this.filter.agentId;
    if (this.filter.lane) f['lane'] = this.filter.lane;
    if (this.filter.sessionKey) f['sessionKey'] = this.filter.sessionKey;
    if (this.filter.batchId) f['batchId'] = this.filter.batchId;
    return Object.keys(f).length > 0 ? f : null;
  }

  /** The rows to show, newest first, filtered by state. */
  visibleRows(): FeedRow[] {
    const out: FeedRow[] = [];
    const all = [...this.rows.values()];
    const want = this.filter.state;
    for (let i = all.length - 1; i >= 0 && out.length < FEED_SHOWN; i--) {
      const r = all[i]!;
      if (want === 'LIVE' && (r.state === '' || TERMINAL.has(r.state))) continue;
      if (want !== '' && want !== 'LIVE' && r.state !== want) continue;
      out.push(r);
    }
    return out;
  }

  /** Forgets the feed (a new filter): it starts again from a little back. */
  resetFeed(): void {
    this.rows.clear();
    this.lagged = 0;
    this.changed();
  }
}

function sum(counts: { count: number }[]): number {
  let n = 0;
  for (const c of counts) n += c.count;
  return n;
}

/**
 * intervalPercentiles computes p50 and p99 of the observations made between
 * two readings of a cumulative histogram (bucket counts are per bucket, not
 * cumulative). Null when nothing was observed in between.
 */
export function intervalPercentiles(
  before: { leMs: number | null; count: number }[],
  after: { leMs: number | null; count: number }[],
): { p50: number; p99: number } | null {
  const prev = new Map(before.map((b) => [b.leMs, b.count]));
  const delta = after
    .map((b) => ({ le: b.leMs, n: b.count - (prev.get(b.leMs) ?? 0) }))
    .filter((b) => b.n > 0)
    .sort((a, b) => (a.le ?? Infinity) - (b.le ?? Infinity));
  const total = delta.reduce((a, b) => a + b.n, 0);
  if (total === 0) return null;
  const at = (q: number): number => {
    let seen = 0;
    for (const b of delta) {
      seen += b.n;
      if (seen >= q * total) return b.le ?? lastFinite(delta);
    }
    return lastFinite(delta);
  };
  return { p50: at(0.5), p99: at(0.99) };
}

function lastFinite(bs: { le: number | null }[]): number {
  for (let i = bs.length - 1; i >= 0; i--) {
    const le = bs[i]!.le;
    if (le !== null) return le;
  }
  return 0;
}
