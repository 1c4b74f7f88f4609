// The GraphQL operations the dashboard sends, and the shapes of their
// answers. Every one is a public operation of the schema (graph/schema):
// the dashboard can do nothing that a client could not.
//
// The operations are the /* GraphQL */ strings below. The build runs
// graphql-codegen over them first: it validates each against the schema
// (the build fails when one no longer does) and writes their answers' types
// to graphql.generated.ts, which the types here are taken from.

import type * as G from './graphql.generated';

export type TaskState = G.TaskState;

export const TERMINAL: ReadonlySet<string> = new Set(['SUCCEEDED', 'FAILED', 'CANCELLED', 'REJECTED', 'EXPIRED']);
export const STATES: TaskState[] = [
  'QUEUED', 'WAITING', 'ASSIGNED', 'RUNNING', 'RETRY_WAIT', 'PARKED',
  'SUCCEEDED', 'FAILED', 'CANCELLED', 'REJECTED', 'EXPIRED',
];

const STATS_FIELDS = /* GraphQL */ `
  fragment StatsFields on Stats {
    at inFlight maxInFlight pending submitted dispatched rejected lastSeq draining
    byState { state count } ended { state count }
    dispatchLatency { count p50Ms p99Ms buckets { leMs count } }
  }`;

export type Stats = G.StatsFieldsFragment;

const statsSubOp = /* GraphQL */ `
  subscription DashboardStats { stats(intervalMs: 1000) { ...StatsFields } }`;
export const STATS_SUB = statsSubOp + STATS_FIELDS;

const INSTANCE_FIELDS = /* GraphQL */ `
  fragment InstanceFields on Instance { id url kind capacity health latencyMs lastCheck lastError failures tabs inFlight }`;

/** Refreshed on every stats tick: what changes without an event of its own. */
const overviewOp = /* GraphQL */ `
  query DashboardOverview {
    lanes { name maxInFlight maxQueued paused pull inFlight pending dropPolicy selectionPolicy retryPolicyName }
    agents { id inFlight pending maxInFlight weight dispatchedLastMinute share }
    instances { ...InstanceFields }
    policies { slot lane name }
  }`;
export const OVERVIEW = overviewOp + INSTANCE_FIELDS;

export type Overview = G.DashboardOverviewQuery;
export type Lane = Overview['lanes'][number];
export type Agent = Overview['agents'][number];
export type Instance = G.InstanceFieldsFragment;
export type PolicyAssignment = Overview['policies'][number];

/** Separate from OVERVIEW: a server without a plugin host answers UNAVAILABLE. */
export const PLUGINS = /* GraphQL */ `
  query DashboardPlugins {
    plugins {
      name slot builtin native state disabledReason activeIn calls faults fallbacks holds p50Us p99Us
      fallbacksByCause { cause count } deadlineGraces
    }
  }`;

export type Plugin = G.DashboardPluginsQuery['plugins'][number];

export const PLUGIN_SUB = /* GraphQL */ `
  subscription DashboardPluginEvents { pluginEvents { seq kind plugin slot lane reason at lagged } }`;

export type PluginEvent = G.DashboardPluginEventsSubscription['pluginEvents'];

export const SERVER = /* GraphQL */ `
  query DashboardServer { server { version startedAt draining } stats { lastSeq } }`;

export type ServerInfo = G.DashboardServerQuery;

/** The latest probes of each check: enough for a latency sparkline. */
export const HEARTBEATS = /* GraphQL */ `
  query DashboardHeartbeats {
    heartbeatChecks { id name url state since enabled intervalMs uptime latencyP50Ms lastProbeAt history(last: 40) { at latencyMs ok } }
  }`;

export type HeartbeatCheck = G.DashboardHeartbeatsQuery['heartbeatChecks'][number];
export type HeartbeatSample = HeartbeatCheck['history'][number];

export const HEARTBEAT_SUB = /* GraphQL */ `
  subscription DashboardHeartbeatEvents { heartbeatEvents { seq at checkId name from to sample { error } } }`;

export type HeartbeatEvent = G.DashboardHeartbeatEventsSubscription['heartbeatEvents'];

/**
 * One element of taskEventFeed.events (null fields left out). The feed's
 * events are JSON, so this type is written by hand, after TaskEvent's fields.
 */
export interface FeedEvent {
  seq: number;
  kind: G.TaskEventKind | string;
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

export const FEED_SUB = /* GraphQL */ `
  subscription DashboardFeed($filter: TaskEventFilter, $after: Int64) {
    taskEventFeed(filter: $filter, after: $after, max: 2000, maxDelayMs: 50) { events count lastSeq }
  }`;

export interface FeedMessage {
  taskEventFeed: Omit<G.DashboardFeedSubscription['taskEventFeed'], 'events'> & { events: FeedEvent[] };
}

const instanceSubOp = /* GraphQL */ `
  subscription DashboardInstances {
    instanceEvents { seq kind at reason missed instance { ...InstanceFields } }
  }`;
export const INSTANCE_SUB = instanceSubOp + INSTANCE_FIELDS;

export type InstanceEvent = G.DashboardInstancesSubscription['instanceEvents'];

const TASK_FIELDS = /* GraphQL */ `
  fragment TaskFields on Task {
    id seq agentId lane sessionKey session priority
    action { kind ref selector params } instruction tabId instanceId
    dependsOn dependencies { id state } batchId parentId depth
    state reason attemptCount result error errorClass
    attempts { n instanceId tabId assignedAt startedAt endedAt errorClass httpStatus errorCode error tabTimeMs actionTimeMs instanceFault }
    submittedAt queuedAt nextRunAt endedAt updatedAt deadline timeoutMs position
    lease { worker attempt leasedAt expiresAt }
    hold { policy lane since reaskAt reason }
    labels { key value } children(first: 50) { id state }
  }`;

export type TaskDetail = G.TaskFieldsFragment;
export type Attempt = TaskDetail['attempts'][number];

const taskOp = /* GraphQL */ `
  query DashboardTask($id: ID!) { task(id: $id) { ...TaskFields } }`;
export const TASK = taskOp + TASK_FIELDS;
const taskSubOp = /* GraphQL */ `
  subscription DashboardTaskLive($id: ID!) { task(id: $id) { ...TaskFields } }`;
export const TASK_SUB = taskSubOp + TASK_FIELDS;

/** The batch's tasks, for the dependency graph (the first 200). */
export const BATCH = /* GraphQL */ `
  query DashboardBatch($id: ID!) {
    batch(id: $id) { id total done parallelism tasks(first: 200) { nodes { id state dependsOn agentId } pageInfo { hasNextPage } } }
  }`;

export type BatchInfo = NonNullable<G.DashboardBatchQuery['batch']>;
export type BatchNode = BatchInfo['tasks']['nodes'][number];

export const CANCEL_TASK = /* GraphQL */ `
  mutation DashboardCancel($id: ID!) { cancelTask(id: $id, reason: "cancelled from the dashboard") { id state } }`;
export const RESET_TASK = /* GraphQL */ `
  mutation DashboardReset($id: ID!) { resetTask(id: $id) { id state } }`;
export const RETRY_TASK = /* GraphQL */ `
  mutation DashboardRetry($id: ID!) { retryTask(id: $id) { id state } }`;
export const STOP_SESSION = /* GraphQL */ `
  mutation DashboardStopSession($key: String!, $all: Boolean) { stopSession(sessionKey: $key, all: $all) { count ids } }`;
export const UPDATE_LANE = /* GraphQL */ `
  mutation DashboardUpdateLane($name: String!, $input: LaneInput!) {
    updateLane(name: $name, input: $input) { name maxInFlight maxQueued paused pull inFlight pending dropPolicy selectionPolicy retryPolicyName }
  }`;

