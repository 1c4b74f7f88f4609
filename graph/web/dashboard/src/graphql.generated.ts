/** Internal type. DO NOT USE DIRECTLY. */
type Exact<T extends { [key: string]: unknown }> = { [K in keyof T]: T[K] };
/** Internal type. DO NOT USE DIRECTLY. */
export type Incremental<T> = T | { [P in keyof T]?: P extends ' $fragmentName' | '__typename' ? T[P] : never };
/** What a full lane does with a new task. */
export type DropPolicy =
  /** Admit the new task and cancel the oldest queued task of the scope that is full (reason "dropped: queue full"). */
  | 'DROP_OLDEST'
  /** Refuse the new task: it is recorded REJECTED and the caller gets QUEUE_FULL (retryable). */
  | 'REJECT';

/** How a failed attempt was classified, which decides whether it is retried. */
export type ErrorClass =
  /** The attempt was cancelled. */
  | 'CANCELLED'
  /** No error. */
  | 'NONE'
  /** Validation errors, unknown action kinds, 4xx: fails at once. */
  | 'PERMANENT'
  /** Network, 5xx, 429, timeout, instance gone: worth retrying. */
  | 'TRANSIENT';

/** What a task whose retry budget is spent becomes. Either way nothing waits on it any longer: its dependents are cancelled, its batch counts it as ended, and its webhook is sent. */
export type Exhausted =
  /** FAILED, a terminal state. BrowserOS's choice. */
  | 'FAIL'
  /** PARKED, for an operator to reset (resetTask runs it again with a fresh budget; its cancelled dependents stay cancelled). CW's choice; the default. */
  | 'PARK';

/** What a check's latest probes say about its target. */
export type HeartbeatState =
  /** The latest `failureThreshold` probes in a row failed. */
  | 'DOWN'
  /** Not decided yet: no probe has succeeded, and fewer than `failureThreshold` have failed (with the default threshold of 1: not probed yet). Its URL or method changed starts it over. */
  | 'UNKNOWN'
  /** The latest probe answered as expected. */
  | 'UP';

/** What happened to an instance. */
export type InstanceEventKind =
  /** It answers health checks (again). */
  | 'HEALTHY'
  /** Added, from the configuration or by `registerInstance`. */
  | 'REGISTERED'
  /** Forgotten (`removeInstance`). */
  | 'REMOVED'
  /** It stopped answering; no new work goes there. */
  | 'UNHEALTHY'
  /** Its configuration changed. */
  | 'UPDATED';

/** What the registry knows of an instance's health. */
export type InstanceHealth =
  /** Answered its last health check. */
  | 'HEALTHY'
  /** Failed its health checks: receives no new work until it recovers. */
  | 'UNHEALTHY'
  /** Not checked yet: receives no work. */
  | 'UNKNOWN';

/** The flavour of a browser instance. */
export type InstanceKind =
  /** A chat-style instance that takes instructions (POST /chat, answered with Server-Sent Events). */
  | 'CHAT'
  /** A single browser instance: Switchyard's built-in one (`switchyard instance`) or a PinchTab bridge. */
  | 'INSTANCE'
  /** A PinchTab server in front of several browsers. */
  | 'PINCHTAB';

/** Changes to a lane; omitted fields stay as they are. */
export type LaneInput = {
  /** The debounce window of its sessions, in milliseconds: 0 (off) to 60000. GoClaw: 800. */
  debounceMs?: number | null | undefined;
  /** What a full queue does. */
  dropPolicy?: DropPolicy | null | undefined;
  /** What its tasks become when their retries are spent. */
  exhausted?: Exhausted | null | undefined;
  /** The deepest spawn depth admitted, 1 to 10000. */
  maxDepth?: number | null | undefined;
  /** The concurrency ceiling (0 dispatches nothing). */
  maxInFlight?: number | null | undefined;
  /** The queue cap (≥ 1). */
  maxQueued?: number | null | undefined;
  /** Pause (true) or resume (false) dispatching. */
  paused?: boolean | null | undefined;
  /** Make it a pull lane (true), whose tasks workers lease, or a lane of browser instances (false). Changing it on a lane that holds tasks that have not ended is a CONFLICT on `input.pull` naming how many: drain the lane first. */
  pull?: boolean | null | undefined;
  /** The lane's retry parameters. */
  retryPolicy?: RetryPolicyInput | null | undefined;
  /** What a full session does (default: the lane's dropPolicy). GoClaw: DROP_OLDEST. */
  sessionDropPolicy?: DropPolicy | null | undefined;
  /** The cap on one session's queued tasks in this lane (0: the engine's maxQueuedPerSession). GoClaw: 10. */
  sessionMaxQueued?: number | null | undefined;
  /** The per-attempt timeout of tasks that set none, in milliseconds. */
  timeoutMs?: number | null | undefined;
};

/** What happened to a plugin. */
export type PluginEventKind =
  /** Its configuration changed. */
  | 'CONFIGURED'
  /** An instance could not be rebuilt, or at start a stored plugin was restored disabled, its configure or smoke decision failing under its stored configuration (delivered first to every subscriber, as the start's REFUSED events are): the native policy decides for it until an operator enables it. */
  | 'DISABLED'
  /** Re-enabled, by an operator or at the end of a quarantine (on probation). */
  | 'ENABLED'
  /** A decision faulted and fell back to the native policy. */
  | 'FAULT'
  /** Loaded (validated and smoke-tested). */
  | 'LOADED'
  /** A slot's policy changed. */
  | 'POLICY_SET'
  /** Its breaker tripped: the native policy decides for it until the event's quarantinedUntil (the reason says why and for how long), then it is on probation. */
  | 'QUARANTINED'
  /** A module was refused at load (nothing changed), or at start a stored plugin or policy choice could not be restored (the default stays in its place); the reason says which and why. */
  | 'REFUSED'
  /** Unloaded. */
  | 'UNLOADED';

/** Why a plugin's decision was answered by its native fallback rather than by the plugin. */
export type PluginFallbackCause =
  /** The plugin was QUARANTINED or DISABLED, and was not asked. */
  | 'BREAKER'
  /** The plugin was unloaded or the server was shutting down (before or during the call). */
  | 'CLOSED'
  /** The plugin faulted on the decision (a trap, an exhausted budget, an invalid answer, a refusal, the deadline): faults counts them. */
  | 'FAULT'
  /** Its instance was being rebuilt after a fault, or after configurePlugin reset it to no configuration. */
  | 'REBUILDING'
  /** The decision's names or details (ABI version 2) would not fit the plugin's memory, and it was not asked. */
  | 'TOO_LARGE';

/**
 * The state of a policy plugin's circuit breaker (plugins/ABI.md, "Faults
 * and the breaker"). Native policies are always ACTIVE.
 */
export type PluginState =
  /** Loaded and deciding. */
  | 'ACTIVE'
  /** An instance could not be rebuilt, or at start its configure refused its stored configuration or its smoke decision faulted under it (disabledReason says which): the native built-in policy decides until an operator runs enablePlugin. */
  | 'DISABLED'
  /** Back from a quarantine and deciding; a fault quarantines it again at once, and enough good decisions make it ACTIVE. */
  | 'PROBATION'
  /** Its breaker tripped (a decision past its deadline, repeated faults, or too much time in faults): the native built-in policy decides until `quarantinedUntil`, when it comes back on PROBATION by itself (or at once with enablePlugin). */
  | 'QUARANTINED';

/** A scheduling decision that a policy fills. */
export type PolicySlot =
  /** Which eligible queue heads go next (global). */
  | 'FAIRNESS'
  /** Whether, and when, a failed attempt runs again. */
  | 'RETRY'
  /** The order of tasks within a (lane, agent) queue. */
  | 'SELECTION';

/** A task's priority within its queue under the built-in selection policy: CRITICAL runs first. */
export type Priority =
  /** Level 0: runs before everything else in its queue. */
  | 'CRITICAL'
  /** Level 1. */
  | 'HIGH'
  /** Level 3: runs last. */
  | 'LOW'
  /** Level 2, the default. */
  | 'NORMAL';

/** A retry policy override. */
export type RetryPolicyInput = {
  /** The delay before the first retry, in milliseconds (default 1000). */
  backoffMs?: number | null | undefined;
  /** Spread the delays (equal jitter). */
  jitter?: boolean | null | undefined;
  /** The attempt budget, the first attempt included (1..100). */
  maxAttempts: number;
  /** The cap on the delay, in milliseconds (default 60000). */
  maxBackoffMs?: number | null | undefined;
  /** The growth of the delay per retry (1..100, default 2). */
  multiplier?: number | null | undefined;
};

/** Which task events to receive. Empty fields match everything; set fields must all match. */
export type TaskEventFilter = {
  /** Only this agent's tasks. */
  agentId?: string | null | undefined;
  /** Only this batch's tasks. */
  batchId?: string | number | null | undefined;
  /** Only these kinds (LAGGED is always delivered). */
  kinds?: Array<TaskEventKind> | null | undefined;
  /** Only this lane's tasks (and its LANE events). */
  lane?: string | null | undefined;
  /** Only this session's tasks. */
  sessionKey?: string | null | undefined;
  /** Only state changes into one of these states. */
  states?: Array<TaskState> | null | undefined;
  /** Only these tasks' events. */
  taskIds?: Array<string | number> | null | undefined;
};

/** What a task event records. */
export type TaskEventKind =
  /** Every task of a batch has ended (`batchId`); no task. */
  | 'BATCH'
  /** The engine changed mode (draining, a policy swap); no task. */
  | 'ENGINE'
  /**
   * A fairness plugin held the task's (lane, agent) queue, the task at its head
   * (ABI v2 hold): nothing of the queue is dispatched until the plugin is asked
   * again. The task stays QUEUED (`to`); `reason` names the plugin and the lane,
   * and `Task.hold` says when it is asked again. Said once per hold: held again
   * by the same plugin at a re-ask, the task gets no new event.
   */
  | 'HELD'
  /**
   * The hold a HELD event announced ended while the task is still QUEUED: the
   * plugin's next decision did not hold its queue, or another fairness policy
   * decides now. A held task that is dispatched or ends says so with its STATE
   * event instead.
   */
  | 'HOLD_ENDED'
  /**
   * Not an engine event: this subscriber missed `skipped` events, because it fell
   * behind the server's bounded buffer or resumed from further back than the
   * server keeps. `seq` is the last event skipped; `reason` says which. Re-read
   * the state you need with queries, then carry on.
   */
  | 'LAGGED'
  /** A lane's configuration changed (`lane` and `reason` say how); no task. */
  | 'LANE'
  /**
   * A pull lane's task was RUNNING under a worker's lease when the server
   * stopped, and the server's start resumed the lease (a durable store): the
   * task stays RUNNING (`from`, `to`) and the worker may still renew, complete,
   * fail or release it with the lease id it holds. `reason` is the task's new
   * reason (`lease resumed after a restart for …: it was leased by …`),
   * `attempt` the attempt that goes on, `at` the start that resumed it.
   */
  | 'LEASE_RESUMED'
  /** A cancelled task's executor call returned, or its lease ran out: the slots it held are free. The state does not change. */
  | 'RELEASED'
  /**
   * A session lost its tab, with the instance it was on or closed by a task of
   * another session (`sessionKey`; `reason` names the tab, the instance and
   * why); no task. The session's next task fails with
   * SESSION_LOST, then the session starts over in a new tab; a session that asked
   * for replay (`sessionReplay`) is replayed in a new tab instead. Also: a
   * session's tab was closed after `executor.idleTabTimeout` unused (a binding
   * restored after a restart included); its binding is gone, and its next task
   * starts over in a new tab.
   */
  | 'SESSION'
  /** A completion arrived for an attempt whose lease had been reclaimed; it was ignored. */
  | 'STALE'
  /** A task changed state (`from` → `to`). A task's first event has no `from`. */
  | 'STATE';

/** Where a task stands in its life. SUCCEEDED, FAILED, CANCELLED, REJECTED and EXPIRED are terminal: a task in one never changes again. */
export type TaskState =
  /** Dispatched: it holds its slots and a lease, the executor is reaching an instance. */
  | 'ASSIGNED'
  /** Terminal: cancelled by a client, an operator, a dropped queue, a failed dependency or shutdown. */
  | 'CANCELLED'
  /** Terminal: the deadline passed while the task was queued. */
  | 'EXPIRED'
  /** Terminal: a permanent error, or the deadline passed while running. */
  | 'FAILED'
  /** The retry budget is spent; the task waits for `resetTask`. Not terminal, but nothing waits on it: its dependents are cancelled (reason `dependency X parked`), and a reset does not bring them back. */
  | 'PARKED'
  /** Ready, waiting for a slot. */
  | 'QUEUED'
  /** Terminal: refused at admission (for example QUEUE_FULL); recorded with its reason. */
  | 'REJECTED'
  /** A failed attempt is backing off before the next one. */
  | 'RETRY_WAIT'
  /** The work has reached a browser instance. */
  | 'RUNNING'
  /** Terminal: the work succeeded; `result` holds the instance's answer. */
  | 'SUCCEEDED'
  /** Waiting for its dependencies to succeed. */
  | 'WAITING';

export type StatsFieldsFragment = { at: string, inFlight: number, maxInFlight: number, pending: number, submitted: number, dispatched: number, rejected: number, lastSeq: number, draining: boolean, byState: Array<{ state: TaskState, count: number }>, ended: Array<{ state: TaskState, count: number }>, dispatchLatency: { count: number, p50Ms: number, p99Ms: number, buckets: Array<{ leMs: number | null, count: number }> } };

export type DashboardStatsSubscriptionVariables = Exact<{ [key: string]: never; }>;


export type DashboardStatsSubscription = { stats: { at: string, inFlight: number, maxInFlight: number, pending: number, submitted: number, dispatched: number, rejected: number, lastSeq: number, draining: boolean, byState: Array<{ state: TaskState, count: number }>, ended: Array<{ state: TaskState, count: number }>, dispatchLatency: { count: number, p50Ms: number, p99Ms: number, buckets: Array<{ leMs: number | null, count: number }> } } };

export type InstanceFieldsFragment = { id: string, url: string, kind: InstanceKind, capacity: number, health: InstanceHealth, latencyMs: number, lastCheck: string | null, lastError: string | null, failures: number, tabs: number, inFlight: number };

export type DashboardOverviewQueryVariables = Exact<{ [key: string]: never; }>;


export type DashboardOverviewQuery = { lanes: Array<{ name: string, maxInFlight: number, maxQueued: number, paused: boolean, pull: boolean, inFlight: number, pending: number, dropPolicy: DropPolicy, selectionPolicy: string, retryPolicyName: string }>, agents: Array<{ id: string, inFlight: number, pending: number, maxInFlight: number, weight: number, dispatchedLastMinute: number, share: number }>, instances: Array<{ id: string, url: string, kind: InstanceKind, capacity: number, health: InstanceHealth, latencyMs: number, lastCheck: string | null, lastError: string | null, failures: number, tabs: number, inFlight: number }>, policies: Array<{ slot: PolicySlot, lane: string | null, name: string }> };

export type DashboardPluginsQueryVariables = Exact<{ [key: string]: never; }>;


export type DashboardPluginsQuery = { plugins: Array<{ name: string, slot: PolicySlot, builtin: boolean, native: boolean, state: PluginState, disabledReason: string | null, activeIn: Array<string>, calls: number, faults: number, fallbacks: number, holds: number, p50Us: number | null, p99Us: number | null, deadlineGraces: number, fallbacksByCause: Array<{ cause: PluginFallbackCause, count: number }> }> };

export type DashboardPluginEventsSubscriptionVariables = Exact<{ [key: string]: never; }>;


export type DashboardPluginEventsSubscription = { pluginEvents: { seq: number, kind: PluginEventKind, plugin: string | null, slot: PolicySlot | null, lane: string | null, reason: string | null, at: string, lagged: number } };

export type DashboardServerQueryVariables = Exact<{ [key: string]: never; }>;


export type DashboardServerQuery = { server: { version: string, startedAt: string, draining: boolean }, stats: { lastSeq: number } };

export type DashboardHeartbeatsQueryVariables = Exact<{ [key: string]: never; }>;


export type DashboardHeartbeatsQuery = { heartbeatChecks: Array<{ id: string, name: string, url: string, state: HeartbeatState, since: string, enabled: boolean, intervalMs: number, uptime: number | null, latencyP50Ms: number | null, lastProbeAt: string | null, history: Array<{ at: string, latencyMs: number, ok: boolean }> }> };

export type DashboardHeartbeatEventsSubscriptionVariables = Exact<{ [key: string]: never; }>;


export type DashboardHeartbeatEventsSubscription = { heartbeatEvents: { seq: number, at: string, checkId: string, name: string, from: HeartbeatState, to: HeartbeatState, sample: { error: string | null } } };

export type DashboardFeedSubscriptionVariables = Exact<{
  filter?: TaskEventFilter | null | undefined;
  after?: number | null | undefined;
}>;


export type DashboardFeedSubscription = { taskEventFeed: { events: unknown, count: number, lastSeq: number } };

export type DashboardInstancesSubscriptionVariables = Exact<{ [key: string]: never; }>;


export type DashboardInstancesSubscription = { instanceEvents: { seq: number, kind: InstanceEventKind, at: string, reason: string | null, missed: number, instance: { id: string, url: string, kind: InstanceKind, capacity: number, health: InstanceHealth, latencyMs: number, lastCheck: string | null, lastError: string | null, failures: number, tabs: number, inFlight: number } } };

export type TaskFieldsFragment = { id: string, seq: number, agentId: string, lane: string, sessionKey: string | null, session: string | null, priority: Priority, instruction: string | null, tabId: string | null, instanceId: string | null, dependsOn: Array<string>, batchId: string | null, parentId: string | null, depth: number, state: TaskState, reason: string | null, attemptCount: number, result: unknown, error: string | null, errorClass: ErrorClass, submittedAt: string, queuedAt: string | null, nextRunAt: string | null, endedAt: string | null, updatedAt: string, deadline: string | null, timeoutMs: number | null, position: number | null, action: { kind: string, ref: string | null, selector: string | null, params: unknown } | null, dependencies: Array<{ id: string, state: TaskState | null }>, attempts: Array<{ n: number, instanceId: string | null, tabId: string | null, assignedAt: string, startedAt: string | null, endedAt: string | null, errorClass: ErrorClass, httpStatus: number | null, errorCode: string | null, error: string | null, tabTimeMs: number | null, actionTimeMs: number | null, instanceFault: boolean }>, lease: { worker: string | null, attempt: number, leasedAt: string | null, expiresAt: string } | null, hold: { policy: string, lane: string, since: string, reaskAt: string | null, reason: string } | null, labels: Array<{ key: string, value: string }>, children: Array<{ id: string, state: TaskState }> };

export type DashboardTaskQueryVariables = Exact<{
  id: string | number;
}>;


export type DashboardTaskQuery = { task: { id: string, seq: number, agentId: string, lane: string, sessionKey: string | null, session: string | null, priority: Priority, instruction: string | null, tabId: string | null, instanceId: string | null, dependsOn: Array<string>, batchId: string | null, parentId: string | null, depth: number, state: TaskState, reason: string | null, attemptCount: number, result: unknown, error: string | null, errorClass: ErrorClass, submittedAt: string, queuedAt: string | null, nextRunAt: string | null, endedAt: string | null, updatedAt: string, deadline: string | null, timeoutMs: number | null, position: number | null, action: { kind: string, ref: string | null, selector: string | null, params: unknown } | null, dependencies: Array<{ id: string, state: TaskState | null }>, attempts: Array<{ n: number, instanceId: string | null, tabId: string | null, assignedAt: string, startedAt: string | null, endedAt: string | null, errorClass: ErrorClass, httpStatus: number | null, errorCode: string | null, error: string | null, tabTimeMs: number | null, actionTimeMs: number | null, instanceFault: boolean }>, lease: { worker: string | null, attempt: number, leasedAt: string | null, expiresAt: string } | null, hold: { policy: string, lane: string, since: string, reaskAt: string | null, reason: string } | null, labels: Array<{ key: string, value: string }>, children: Array<{ id: string, state: TaskState }> } | null };

export type DashboardTaskLiveSubscriptionVariables = Exact<{
  id: string | number;
}>;


export type DashboardTaskLiveSubscription = { task: { id: string, seq: number, agentId: string, lane: string, sessionKey: string | null, session: string | null, priority: Priority, instruction: string | null, tabId: string | null, instanceId: string | null, dependsOn: Array<string>, batchId: string | null, parentId: string | null, depth: number, state: TaskState, reason: string | null, attemptCount: number, result: unknown, error: string | null, errorClass: ErrorClass, submittedAt: string, queuedAt: string | null, nextRunAt: string | null, endedAt: string | null, updatedAt: string, deadline: string | null, timeoutMs: number | null, position: number | null, action: { kind: string, ref: string | null, selector: string | null, params: unknown } | null, dependencies: Array<{ id: string, state: TaskState | null }>, attempts: Array<{ n: number, instanceId: string | null, tabId: string | null, assignedAt: string, startedAt: string | null, endedAt: string | null, errorClass: ErrorClass, httpStatus: number | null, errorCode: string | null, error: string | null, tabTimeMs: number | null, actionTimeMs: number | null, instanceFault: boolean }>, lease: { worker: string | null, attempt: number, leasedAt: string | null, expiresAt: string } | null, hold: { policy: string, lane: string, since: string, reaskAt: string | null, reason: string } | null, labels: Array<{ key: string, value: string }>, children: Array<{ id: string, state: TaskState }> } };

export type DashboardBatchQueryVariables = Exact<{
  id: string | number;
}>;


export type DashboardBatchQuery = { batch: { id: string, total: number, done: boolean, parallelism: number | null, tasks: { nodes: Array<{ id: string, state: TaskState, dependsOn: Array<string>, agentId: string }>, pageInfo: { hasNextPage: boolean } } } | null };

export type DashboardCancelMutationVariables = Exact<{
  id: string | number;
}>;


export type DashboardCancelMutation = { cancelTask: { id: string, state: TaskState } | null };

export type DashboardResetMutationVariables = Exact<{
  id: string | number;
}>;


export type DashboardResetMutation = { resetTask: { id: string, state: TaskState } | null };

export type DashboardRetryMutationVariables = Exact<{
  id: string | number;
}>;


export type DashboardRetryMutation = { retryTask: { id: string, state: TaskState } | null };

export type DashboardStopSessionMutationVariables = Exact<{
  key: string;
  all?: boolean | null | undefined;
}>;


export type DashboardStopSessionMutation = { stopSession: { count: number, ids: Array<string> } };

export type DashboardUpdateLaneMutationVariables = Exact<{
  name: string;
  input: LaneInput;
}>;


export type DashboardUpdateLaneMutation = { updateLane: { name: string, maxInFlight: number, maxQueued: number, paused: boolean, pull: boolean, inFlight: number, pending: number, dropPolicy: DropPolicy, selectionPolicy: string, retryPolicyName: string } | null };
