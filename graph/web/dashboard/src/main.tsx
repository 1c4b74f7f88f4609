// The dashboard's entry point: reads the page configuration, opens the API
// (HTTP + one WebSocket), starts the subscriptions (stats, the task event
// feed, instance events), and renders the page from the store at most once
// per animation frame.

import { render } from 'preact';
import { API, APIError, type Link } from './api';
import { endpoints, readConfig } from './config';
import { Detail } from './detail';
import { Feed } from './feed';
import { Agents, Charts, Heartbeats, Instances, Lanes, Policies, Tiles } from './panels';
import {
  CANCEL_TASK,
  FEED_SUB,
  type FeedMessage,
  HEARTBEAT_SUB,
  HEARTBEATS,
  type HeartbeatCheck,
  type HeartbeatEvent,
  INSTANCE_SUB,
  type InstanceEvent,
  type Lane,
  OVERVIEW,
  type Overview,
  PLUGIN_SUB,
  PLUGINS,
  type Plugin,
  type PluginEvent,
  RESET_TASK,
  RETRY_TASK,
  SERVER,
  type ServerInfo,
  STATS_SUB,
  type Stats,
  STOP_SESSION,
  UPDATE_LANE,
} from './queries';
import { BACKFILL, type FeedFilter, type FeedRow, Store } from './store';
import './dashboard.css';

/** What every view gets: the state, the API and the actions. */
export interface Ctx {
  store: Store;
  api: API;
  actions: Actions;
  ui: UI;
}

/** Page-level state that is not the server's. */
class UI {
  link: Link = 'connecting';
  token = '';
  authRequired = false;
  title = 'Switchyard';
  route = '';
  toasts: { id: number; text: string; bad: boolean }[] = [];
  frozen: FeedRow[] | null = null;
  private nextToast = 1;

  constructor(private readonly store: Store) {}

  toast(text: string, bad = false): void {
    const id = this.nextToast++;
    this.toasts = [...this.toasts, { id, text, bad }].slice(-4);
    this.store.changed();
    window.setTimeout(() => {
      this.toasts = this.toasts.filter((t) => t.id !== id);
      this.store.changed();
    }, bad ? 8000 : 4000);
  }
}

const TOKEN_KEY = 'switchyard.dashboard.token';

/** Everything a button can do: each is one public mutation, or a view change. */
export class Actions {
  private stopFeed: (() => void) | null = null;

  constructor(
    private readonly store: Store,
    private readonly api: API,
    private readonly ui: UI,
  ) {}

  private async mutate<T>(what: string, query: string, vars: Record<string, unknown>): Promise<T | null> {
    try {
      const data = await this.api.request<T>(query, vars);
      this.ui.toast(what);
      return data;
    } catch (e) {
      const err = e instanceof APIError ? e : new APIError('', String(e));
      this.ui.toast(`${what} failed: ${err.message}`, true);
      return null;
    }
  }

  async cancel(id: string): Promise<void> {
    await this.mutate(`Cancelled ${id}`, CANCEL_TASK, { id });
  }

  async reset(id: string): Promise<void> {
    await this.mutate(`Reset ${id}`, RESET_TASK, { id });
  }

  async retry(id: string): Promise<void> {
    const d = await this.mutate<{ retryTask: { id: string } }>(`Retried ${id}`, RETRY_TASK, { id });
    if (d && d.retryTask.id !== id) this.open(d.retryTask.id);
  }

  async stopSession(key: string, all: boolean): Promise<void> {
    await this.mutate(`Stopped session ${key}${all ? ' (all)' : ''}`, STOP_SESSION, { key, all });
  }

  async updateLane(name: string, input: { paused?: boolean; maxInFlight?: number }): Promise<void> {
    const what =
      input.paused === undefined ? `Lane ${name}: ceiling ${input.maxInFlight}` : `Lane ${name} ${input.paused ? 'paused' : 'resumed'}`;
    const d = await this.mutate<{ updateLane: Lane }>(what, UPDATE_LANE, { name, input });
    if (d) this.store.onLane(d.updateLane);
  }

  open(id: string): void {
    window.location.hash = `#/task/${id}`;
  }

  /** Sets the server-side filters and restarts the feed with them. */
  filterFeed(f: Partial<FeedFilter>): void {
    this.store.filter = { ...this.store.filter, ...f };
    this.store.resetFeed();
    this.startFeed(true);
  }

  filterState(state: string): void {
    this.store.filter = { ...this.store.filter, state };
    this.ui.frozen = null;
    this.store.changed();
  }

  pauseFeed(on: boolean): void {
    this.store.feedPaused = on;
    this.ui.frozen = on ? this.store.visibleRows() : null;
    this.store.changed();
  }

  setToken(token: string): void {
    this.ui.token = token;
    try {
      if (token) window.localStorage.setItem(TOKEN_KEY, token);
      else window.localStorage.removeItem(TOKEN_KEY);
    } catch {
      // storage may be disabled: the token then lasts as long as the page
    }
    this.api.setToken(token);
    void this.refresh();
  }

  /**
   * Starts the feed subscription. With backfill (first load, new filter) it
   * starts BACKFILL events back from the head so the page is not empty;
   * after that every restart resumes after the last seq seen.
   */
  startFeed(backfill: boolean): void {
    this.stopFeed?.();
    if (backfill) this.store.feedAfter = null;
    let head: number | null = null;
    const begin = () => {
      this.stopFeed = this.api.subscribe<FeedMessage>({
        query: FEED_SUB,
        variables: () => ({
          filter: this.store.serverFilter(),
          after: this.store.feedAfter ?? (head === null ? null : Math.max(0, head - BACKFILL)),
        }),
        next: (d) => this.store.onEvents(d.taskEventFeed.events, d.taskEventFeed.lastSeq),
        error: (e) => this.ui.toast(`Task feed: ${e.message}`, true),
      });
    };
    if (!backfill) {
      begin();
      return;
    }
    this.api
      .request<ServerInfo>(SERVER)
      .then((d) => {
        head = d.stats.lastSeq;
        this.store.version = d.server.version;
      })
      .catch(() => {})
      .finally(begin);
  }

  private heartbeatsFollowed = false;

  /** Subscribes to the checks' state changes, once the server has shown it runs checks. */
  private followHeartbeats(): void {
    if (this.heartbeatsFollowed) return;
    this.heartbeatsFollowed = true;
    this.api.subscribe<{ heartbeatEvents: HeartbeatEvent }>({
      query: HEARTBEAT_SUB,
      variables: () => ({}),
      next: (d) => this.store.onHeartbeatEvent(d.heartbeatEvents),
      error: (e) => this.ui.toast(`Heartbeat events: ${e.message}`, true),
    });
  }

  private overviewBusy = false;
  private pluginsAt = 0;

  /** Reads what changes without events of its own: lanes, agents, instances, policies, plugins. */
  async refresh(): Promise<void> {
    if (this.overviewBusy) return;
    this.overviewBusy = true;
    const forced = this.store.laneChanged;
    this.store.laneChanged = false;
    try {
      this.store.onOverview(await this.api.request<Overview>(OVERVIEW));
    } catch (e) {
      this.store.overviewError = e instanceof Error ? e.message : String(e);
      this.store.changed();
    } finally {
      this.overviewBusy = false;
    }
    if (Date.now() - this.pluginsAt < 3000 && !forced) return;
    this.pluginsAt = Date.now();
    try {
      this.store.heartbeats = (await this.api.request<{ heartbeatChecks: HeartbeatCheck[] }>(HEARTBEATS)).heartbeatChecks;
      this.store.heartbeatsError = '';
      this.followHeartbeats();
    } catch (e) {
      this.store.heartbeats = null;
      this.store.heartbeatsError = e instanceof APIError && e.code === 'UNAVAILABLE' ? 'not available on this server' : String(e);
    }
    try {
      this.store.plugins = (await this.api.request<{ plugins: Plugin[] }>(PLUGINS)).plugins;
      this.store.pluginsError = '';
    } catch (e) {
      this.store.plugins = null;
      this.store.pluginsError = e instanceof APIError && e.code === 'UNAVAILABLE' ? 'not available on this server yet' : String(e);
    }
    this.store.changed();
  }
}

function Header({ ctx }: { ctx: Ctx }) {
  const { ui, store } = ctx;
  const label: Record<Link, string> = {
    connecting: 'connecting…',
    live: 'live',
    retrying: 'reconnecting…',
    unauthorized: 'not authorised: check the token',
  };
  return (
    <header class="top">
      <h1>
        <a href="#/">{ui.title}</a> <span class="dim">dashboard {store.version ? `· ${store.version}` : ''}</span>
      </h1>
      <span class={`link ${ui.link}`} id="link" title="the subscription socket">
        {label[ui.link]}
      </span>
      <form
        class={`token ${ui.authRequired && !ui.token ? 'needed' : ''}`}
        onSubmit={(e) => {
          e.preventDefault();
          const input = (e.currentTarget as HTMLFormElement).elements.namedItem('token') as HTMLInputElement;
          ctx.actions.setToken(input.value.trim());
        }}
      >
        <input
          name="token"
          type="password"
          autocomplete="off"
          placeholder={ui.authRequired ? 'token (required)' : 'token'}
          defaultValue={ui.token}
          aria-label="API token"
        />
        <button type="submit">{ui.token ? 'Change token' : 'Use token'}</button>
      </form>
      <a class="dim" href="../">playground</a>
    </header>
  );
}

function App({ ctx }: { ctx: Ctx }) {
  const route = ctx.ui.route;
  const taskId = route.startsWith('/task/') ? decodeURIComponent(route.slice('/task/'.length)) : '';
  return (
    <div class={`app ${taskId ? 'with-detail' : ''}`}>
      <Header ctx={ctx} />
      <main>
        <Tiles ctx={ctx} />
        <Charts ctx={ctx} />
        <div class="grid">
          <Lanes ctx={ctx} />
          <Agents ctx={ctx} />
          <Instances ctx={ctx} />
          <Policies ctx={ctx} />
          <Heartbeats ctx={ctx} />
        </div>
        <Feed ctx={ctx} />
      </main>
      {taskId ? <Detail key={taskId} ctx={ctx} id={taskId} /> : null}
      <div class="toasts" aria-live="polite">
        {ctx.ui.toasts.map((t) => (
          <div key={t.id} class={`toast ${t.bad ? 'bad' : ''}`}>
            {t.text}
          </div>
        ))}
      </div>
    </div>
  );
}

function boot(): void {
  const config = readConfig();
  const { http, ws } = endpoints(config);
  const store = new Store();
  const api = new API(http, ws);
  const ui = new UI(store);
  const actions = new Actions(store, api, ui);
  const ctx: Ctx = { store, api, actions, ui };
  ui.title = config.title;
  ui.authRequired = config.authRequired;
  document.title = `${config.title} dashboard`;
  try {
    ui.token = window.localStorage.getItem(TOKEN_KEY) ?? '';
  } catch {
    ui.token = '';
  }
  api.setToken(ui.token);
  api.onLink = (l) => {
    ui.link = l;
    store.changed();
  };

  // A frozen feed shows the rows it had when frozen.
  const visible = store.visibleRows.bind(store);
  store.visibleRows = () => ui.frozen ?? visible();

  const route = () => {
    ui.route = window.location.hash.replace(/^#/, '') || '/';
    store.changed();
  };
  window.addEventListener('hashchange', route);
  route();

  const root = document.getElementById('app') as HTMLElement;
  root.textContent = '';
  store.listen(() => {
    // Each render is a User Timing measure (switchyard:render), for the
    // browser's performance tools and the dashboard's own measurements.
    const start = performance.now();
    render(<App ctx={ctx} />, root);
    performance.measure('switchyard:render', { start });
    if (store.laneChanged) void actions.refresh();
  });

  api.subscribe<{ stats: Stats }>({
    query: STATS_SUB,
    variables: () => ({}),
    next: (d) => {
      store.onStats(d.stats);
      void actions.refresh();
    },
    error: (e) => ui.toast(`Stats: ${e.message}`, true),
  });
  api.subscribe<{ instanceEvents: InstanceEvent }>({
    query: INSTANCE_SUB,
    variables: () => ({}),
    next: (d) => store.onInstanceEvent(d.instanceEvents),
    error: (e) => ui.toast(`Instances: ${e.message}`, true),
  });
  api.subscribe<{ pluginEvents: PluginEvent }>({
    query: PLUGIN_SUB,
    variables: () => ({}),
    next: (d) => store.onPluginEvent(d.pluginEvents),
    error: (e) => ui.toast(`Plugin events: ${e.message}`, true),
  });
  actions.startFeed(true);
  void actions.refresh();
  store.changed();
}

boot();
