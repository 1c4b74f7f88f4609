// The GraphQL operations the dashboard sends, and the shapes of their
// answers. Every one is a public operation of schema.graphqls: the
// dashboard can do nothing that a client could not.

export type TaskState =
  | 'QUEUED'
  | 'WAITING'
  | 'ASSIGNED'
  | 'RUNNING'
  | 'RETRY_WAIT'
  | 'SUCCEEDED'
  | 'FAILED'
  | 'PARKED'
  | 'CANCELLED'
  | 'REJECTED'
  | 'EXPIRED';

export const TERMINAL: ReadonlySet<string> = new Set(['SUCCEEDED', 'FAILED', 'CANCELLED', 'REJECTED', 'EXPIRED']);
export const STATES: TaskState[] = [
  'QUEUED', 'WAITING', 'ASSIGNED', 'RUNNING', 'RETRY_WAIT', 'PARKED',
  'SUCCEEDED', 'FAILED', 'CANCELLED', 'REJECTED', 'EXPIRED',
];

export interface StateCount { state: TaskState; count: number }
export interface LatencyBucket { leMs: number | null; count: number }

export interface Stats {
  at: string;
  inFlight: number;
  maxInFlight: number;
  pending: number;
  submitted: number;
  dispatched: number;
  rejected: number;
  lastSeq: number;
  draining: boolean;
  byState: StateCount[];
  ended: StateCount[];
  dispatchLatency: { count: number; p50Ms: number; p99Ms: number; buckets: LatencyBucket[] };
}

const statsFields = `at inFlight maxInFlight pending submitted dispatched rejected lastSeq draining
  byState { state count } ended { state count }
  dispatchLatency { count p50Ms p99Ms buckets { leMs count } }`;

export const STATS_SUB = `subscription DashboardStats { stats(intervalMs: 1000) { ${statsFields} } }`;

export interface Lane {
  name: string;
  maxInFlight: number;
  maxQueued: number;
  paused: boolean;
  inFlight: number;
  pending: number;
  dropPolicy: string;
  selectionPolicy: string;
  retryPolicyName: string;
}

export interface Agent {
  id: string;
  inFlight: number;
  pending: number;
  maxInFlight: number;
  weight: number;
  dispatchedLastMinute: number;
  share: number;
}

export interface Instance {
  id: string;
  url: string;
  kind: string;
  capacity: number;
  health: 'UNKNOWN' | 'HEALTHY' | 'UNHEALTHY';
  latencyMs: number;
  lastCheck: string | null;
  lastError: string | null;
  failures: number;
  tabs: number;
  inFlight: number;
}

export interface PolicyAssignment { slot: string; lane: string | null; name: string }

export interface Plugin {
  name: string;
  slot: string;
  builtin: boolean;
  native: boolean;
  state: 'ACTIVE' | 'DISABLED';
  disabledReason: string | null;
  activeIn: string[];
  calls: number;
  faults: number;
  fallbacks: number;
  p50Us: number;
  p99Us: number;
}

export interface PluginEvent {
  seq: number;
  kind: string;
  plugin: string | null;
  slot: string | null;
  lane: string | null;
  reason: string | null;
  at: string;
  lagged: number;
}

export const PLUGIN_SUB = `subscription DashboardPluginEvents { pluginEvents { seq kind plugin slot lane reason at lagged } }`;

const instanceFields = 'id url kind capacity health latencyMs lastCheck lastError failures tabs inFlight';

/** Refreshed on every stats tick: what changes without an event of its own. */
export const OVERVIEW = `query DashboardOverview {
  lanes { name maxInFlight maxQueued paused inFlight pending dropPolicy selectionPolicy retryPolicyName }
  agents { id inFlight pending maxInFlight weight dispatchedLastMinute share }
  instances { ${instanceFields} }
  policies { slot lane name }
}`;

export interface Overview {
  lanes: Lane[];
  agents: Agent[];
  instances: Instance[];
  policies: PolicyAssignment[];
}

/** Separate from OVERVIEW: a server without a plugin host answers UNAVAILABLE. */
export const PLUGINS = `query DashboardPlugins {
  plugins { name slot builtin native state disabledReason activeIn calls faults fallbacks p50Us p99Us }
}`;

export interface HeartbeatSample {
  at: string;
  latencyMs: number;
  ok: boolean;
}

export interface HeartbeatCheck {
  id: string;
  name: string;
  url: string;
  state: 'UNKNOWN' | 'UP' | 'DOWN';
  since: string;
  enabled: boolean;
  intervalMs: number;
  uptime: number | null;
  latencyP50Ms: number | null;
  lastProbeAt: string | null;
  history: HeartbeatSample[];
}

/** The latest probes of each check: enough for a latency sparkline. */
export const HEARTBEATS = `query DashboardHeartbeats {
  heartbeatChecks { id name url state since enabled intervalMs uptime latencyP50Ms lastProbeAt history(last: 40) { at latencyMs ok } }
}`;

export interface HeartbeatEvent {
  seq: number;
  at: string;
  checkId: string;
  name: string;
  from: string;
  to: string;
  sample: { error: string | null };
}

export const HEARTBEAT_SUB = `subscription DashboardHeartbeatEvents { heartbeatEvents { seq at checkId name from to sample { error } } }`;

export const SERVER = `query DashboardServer { server { version startedAt draining } stats { lastSeq } }`;

export interface ServerInfo {
  server: { version: string; startedAt: string; draining: boolean };
  stats: { lastSeq: number };
}

/** One element of taskEventFeed.events (null fields left out). */
export interface FeedEvent {
  seq: number;
  kind: 'STATE' | 'RELEASED' | 'STALE' | 'LANE' | 'ENGINE' | 'LAGGED' | 'BATCH' | string;
  at: string;
  taskId?: string;
  agentId?: string;
  lane?: string;
  sessionKey?: string;
  batchId?: string;
  from?: TaskState;
  to?: TaskState;
  attempt?: number;
  reason?: string;
  skipped?: number;
}

export const FEED_SUB = `subscription DashboardFeed($filter: TaskEventFilter, $after: Int64) {
  taskEventFeed(filter: $filter, after: $after, max: 2000, maxDelayMs: 50) { events count lastSeq }
}`;

export interface FeedMessage { taskEventFeed: { events: FeedEvent[]; count: number; lastSeq: number } }

export const INSTANCE_SUB = `subscription DashboardInstances {
  instanceEvents { seq kind at reason missed instance { ${instanceFields} } }
}`;

export interface InstanceEvent {
  seq: number;
  kind: string;
  at: string;
  reason: string | null;
  missed: number;
  instance: Instance;
}

export interface Attempt {
  n: number;
  instanceId: string | null;
  tabId: string | null;
  assignedAt: string;
  startedAt: string | null;
  endedAt: string | null;
  errorClass: string;
  httpStatus: number | null;
  error: string | null;
}

export interface TaskDetail {
  id: string;
  seq: number;
  agentId: string;
  lane: string;
  sessionKey: string | null;
  session: string | null;
  priority: string;
  action: { kind: string; ref: string | null; selector: string | null; params: unknown } | null;
  instruction: string | null;
  tabId: string | null;
  instanceId: string | null;
  dependsOn: string[];
  dependencies: { id: string; state: TaskState | null }[];
  batchId: string | null;
  parentId: string | null;
  depth: number;
  state: TaskState;
  reason: string | null;
  attempts: Attempt[];
  attemptCount: number;
  result: unknown;
  error: string | null;
  errorClass: string;
  submittedAt: string;
  queuedAt: string | null;
  nextRunAt: string | null;
  endedAt: string | null;
  updatedAt: string;
  deadline: string | null;
  timeoutMs: number | null;
  position: number | null;
  labels: { key: string; value: string }[];
  children: { id: string; state: TaskState }[];
}

const taskFields = `id seq agentId lane sessionKey session priority
  action { kind ref selector params } instruction tabId instanceId
  dependsOn dependencies { id state } batchId parentId depth
  state reason attemptCount result error errorClass
  attempts { n instanceId tabId assignedAt startedAt endedAt errorClass httpStatus error }
  submittedAt queuedAt nextRunAt endedAt updatedAt deadline timeoutMs position
  labels { key value } children(first: 50) { id state }`;

export const TASK = `query DashboardTask($id: ID!) { task(id: $id) { ${taskFields} } }`;
export const TASK_SUB = `subscription DashboardTaskLive($id: ID!) { task(id: $id) { ${taskFields} } }`;

export interface BatchNode { id: string; state: TaskState; dependsOn: string[]; agentId: string }
export interface BatchInfo {
  id: string;
  total: number;
  done: boolean;
  parallelism: number | null;
  tasks: { nodes: BatchNode[]; pageInfo: { hasNextPage: boolean } };
}

/** The batch's tasks, for the dependency graph (the first 200). */
export const BATCH = `query DashboardBatch($id: ID!) {
  batch(id: $id) { id total done parallelism tasks(first: 200) { nodes { id state dependsOn agentId } pageInfo { hasNextPage } } }
}`;

export const CANCEL_TASK = `mutation DashboardCancel($id: ID!) { cancelTask(id: $id, reason: "cancelled from the dashboard") { id state } }`;
export const RESET_TASK = `mutation DashboardReset($id: ID!) { resetTask(id: $id) { id state } }`;
export const RETRY_TASK = `mutation DashboardRetry($id: ID!) { retryTask(id: $id) { id state } }`;
export const STOP_SESSION = `mutation DashboardStopSession($key: String!, $all: Boolean) { stopSession(sessionKey: $key, all: $all) { count ids } }`;
export const UPDATE_LANE = `mutation DashboardUpdateLane($name: String!, $input: LaneInput!) {
  updateLane(name: $name, input: $input) { name maxInFlight maxQueued paused inFlight pending dropPolicy selectionPolicy retryPolicyName }
}`;
