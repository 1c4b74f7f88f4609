/** Internal type. DO NOT USE DIRECTLY. */
type Exact<T extends { [key: string]: unknown }> = { [K in keyof T]: T[K] };
/** Internal type. DO NOT USE DIRECTLY. */
export type Incremental<T> = T | { [P in keyof T]?: P extends ' $fragmentName' | '__typename' ? T[P] : never };
/** A browser interaction. */
export type ActionInput = {
  /** What to do: click, dblclick, fill, type, press, hover, focus, select, check, uncheck, scroll, navigate, text, snapshot, screenshot, pdf, evaluate, close, … (the README's table; another kind is INVALID_INPUT). */
  kind: string;
  /** Kind-specific parameters: a JSON object (e.g. `{"url": "https://example.com"}`, `{"text": "hello"}`). `navigate` (`goto`) requires `url` and `evaluate` (`eval`) `expression`, non-empty strings: without, INVALID_INPUT on `action.params.url` (`.expression`) at submit (except on a pull lane). `text` takes `maxChars` (1..1000000, the default) and `snapshot` `filter: "interactive"` (only what can be acted on) and `maxNodes` (1..10000, the default); an answer larger than 256 KiB becomes an artifact (see `Task.result`). */
  params?: unknown;
  /** An element reference from a snapshot (e.g. `e12`); a malformed one is INVALID_INPUT on `action.ref`. */
  ref?: string | null | undefined;
  /** A selector: `css:#go`, a bare CSS selector, `xpath://button` or `text:Go` (balanced brackets, parentheses and quotes; a malformed one, such as `xpath://[[`, is INVALID_INPUT on `action.selector` at submit). */
  selector?: string | null | undefined;
};

/** One task of a batch. */
export type BatchItemInput = {
  /** A key unique within the batch, so that other items can name this one in their dependsOn. */
  key?: string | null | undefined;
  /** The task. */
  task: SubmitTaskInput;
};

/** The codes of `extensions.code` in GraphQL errors, and of `ItemError.code`. */
export type ErrorCode =
  /** The request does not fit the current state (e.g. cancelling a task that has ended), or reuses an idempotency key for a different request (`field` is its `idempotencyKey`, `taskId` the task the key names). */
  | 'CONFLICT'
  /** Dependencies would form a cycle; `ids` lists the items on it. */
  | 'CYCLE'
  /** The server is draining and refuses new work. */
  | 'DRAINING'
  /** The credentials do not allow this (the role, or another agent's task or schedule), or the server refuses it to everyone (introspection turned off). HTTP 403. */
  | 'FORBIDDEN'
  /** An unexpected server error. */
  | 'INTERNAL'
  /** The request is malformed; `field` names the culprit (e.g. `input.action.params`). */
  | 'INVALID_INPUT'
  /** The lease a call names is not held (any more): `leaseState` says why (EXPIRED, COMPLETED, FAILED, RELEASED, CANCELLED, SHUTDOWN or UNKNOWN) and `taskId` names its task. Stop working on it. */
  | 'LEASE_LOST'
  /** A request limit is exceeded: batch size, query complexity or depth, body size, page size. */
  | 'LIMIT'
  /** No such task, lane, batch, instance or artifact. */
  | 'NOT_FOUND'
  /** A policy plugin's module failed validation: its ABI, exports or imports, or a smoke decision that faults under no configuration too (one that faults only under the configuration given is INVALID_INPUT on the configuration). */
  | 'PLUGIN_INVALID'
  /** Admission refused: a queue cap is reached. `retryable` is true; `counts` says which scope is full. */
  | 'QUEUE_FULL'
  /** The token is over its rate of mutations: `retryable` is true and `retryAfterMs` says when the same request would pass. */
  | 'RATE_LIMITED'
  /** No valid credentials: a missing or unknown bearer token (HTTP 401; a WebSocket is closed with 4403). */
  | 'UNAUTHENTICATED'
  /** The store could not answer or confirm durability; retry. */
  | 'UNAVAILABLE';

/** What a task whose retry budget is spent becomes. Either way nothing waits on it any longer: its dependents are cancelled, its batch counts it as ended, and its webhook is sent. */
export type Exhausted =
  /** FAILED, a terminal state. BrowserOS's choice. */
  | 'FAIL'
  /** PARKED, for an operator to reset (resetTask runs it again with a fresh budget; its cancelled dependents stay cancelled). CW's choice; the default. */
  | 'PARK';

/** A key and its value. */
export type LabelInput = {
  /** The key (1..256 bytes). */
  key: string;
  /** The value (at most 256 bytes). */
  value: string;
};

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

/** How a task joins its session's queue. */
export type QueueMode =
  /** Wait its turn behind the session's earlier tasks (the default). */
  | 'ENQUEUE'
  /** Cancel what the session is running and jump ahead of its queued tasks. Needs a sessionKey or a tabId. */
  | 'INTERRUPT'
  /** INTERRUPT, and also cancel the session's tasks waiting behind (queued, waiting for dependencies, backing off): GoClaw's interrupt. Needs a sessionKey or a tabId. */
  | 'INTERRUPT_DRAIN';

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

/** A task to submit. Exactly one of `action` and `instruction` is required. */
export type SubmitTaskInput = {
  /** The browser interaction to perform. */
  action?: ActionInput | null | undefined;
  /** The agent submitting it: the unit of fairness (1..256 bytes). */
  agentId: string;
  /** When it must have ended (in the future, for a new task; a resend under the same idempotencyKey answers with its task even once it has passed): no attempt starts at or after it (see `Task.deadline`). */
  deadline?: string | null | undefined;
  /** Tasks that must succeed first: task ids, or in `submitTasks` the keys of other items. */
  dependsOn?: Array<string | number> | null | undefined;
  /** What it becomes when its retries are spent (default: its lane's `exhausted`). */
  exhausted?: Exhausted | null | undefined;
  /**
   * A key that makes resubmission safe, scoped to the agent (at most 256
   * bytes; an empty key is none: each such submission records a new task and
   * reports no `replayed`): the same key with
   * the same request returns the original task (even once it has ended, for as
   * long as the store keeps it); the same key with a different request is a
   * CONFLICT naming the original in `taskId`, and records nothing. The request
   * is every field of this input but `agentId` and the key itself, as the
   * server normalizes them (defaults filled in; `params` compared as JSON
   * values; `labels` and `dependsOn` in any order; the action's `kind` in any
   * case): action or instruction, lane, sessionKey, tabId, instanceId,
   * priority, dependsOn, parentId, deadline, timeoutMs, retryPolicy,
   * webhookUrl, labels, queueMode, exhausted, sessionMaxInFlight and
   * sessionReplay. In a batch, an item's `dependsOn` on other items of the
   * batch (by their keys) is not compared, nor are the batch's own fields.
   * Whether a submission with a key was such a replay is in `submitTask`'s
   * response as `extensions.replayed`, in a `submitTasks` item's `replayed`.
   */
  idempotencyKey?: string | null | undefined;
  /** The instance to run on (else the scheduler chooses). */
  instanceId?: string | null | undefined;
  /** A free-text instruction, for chat-style instances. */
  instruction?: string | null | undefined;
  /** Free-form labels (at most 64; keys 1..256 bytes, values at most 256). */
  labels?: Array<LabelInput> | null | undefined;
  /** The lane to run in (default "main"). An unknown lane is INVALID_INPUT. */
  lane?: string | null | undefined;
  /** The task that spawned this one (its depth + 1 must fit the lane's maxDepth). */
  parentId?: string | number | null | undefined;
  /** Its priority within its queue. */
  priority?: Priority | null | undefined;
  /** How it joins its session's queue. */
  queueMode?: QueueMode | null | undefined;
  /** Its own retry policy, overriding the lane's. */
  retryPolicy?: RetryPolicyInput | null | undefined;
  /** Tasks sharing a session key run one at a time (default: the tab, if any). */
  sessionKey?: string | null | undefined;
  /** Sets its session's concurrency (1..100; GoClaw's per-request concurrency, e.g. 3 for a group chat). The latest task that sets it wins; omitted, the session keeps its ceiling (default engine.sessionMaxInFlight). Needs a sessionKey or a tabId. */
  sessionMaxInFlight?: number | null | undefined;
  /**
   * Opts its session into replay: if the session's tab is lost (closed behind
   * Switchyard's back, gone with its instance's restart or removal), the
   * executor opens a new tab and replays the session's actions from its first
   * task, then runs this one, instead of failing it with SESSION_LOST. The
   * session's log is kept (in memory, up to executor.maxReplayActions actions)
   * only while every task of the session, from its first, asks for it. Needs
   * a sessionKey and no tabId.
   */
  sessionReplay?: boolean | null | undefined;
  /** The tab to run in (else the session's tab, or a new one). */
  tabId?: string | null | undefined;
  /** The per-attempt timeout, in milliseconds (1..86400000; default the lane's). */
  timeoutMs?: number | null | undefined;
  /** An absolute http(s) URL called when it reaches a terminal state. A host that is an address webhooks may not call (loopback, private, link-local such as 169.254.169.254, unless the server's `webhooks.allowPrivate` or `webhooks.allowNetworks` allow it) is INVALID_INPUT here; a host name is resolved when it is called. */
  webhookUrl?: string | null | undefined;
};

/** Tasks to submit as one batch. */
export type SubmitTasksInput = {
  /** The tasks, in order (1..Limits.maxBatch). */
  items: Array<BatchItemInput>;
  /** How many of the batch's tasks may run at once (1..10; omit for no cap). */
  parallelism?: number | null | undefined;
  /** An absolute http(s) URL called when the whole batch has ended; its host is checked as a task's `webhookUrl` is. */
  webhookUrl?: string | null | undefined;
};

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

export type AgentStatsQueryVariables = Exact<{ [key: string]: never; }>;


export type AgentStatsQuery = { stats: { lastSeq: number } };

export type AgentSubmitMutationVariables = Exact<{
  in: SubmitTasksInput;
}>;


export type AgentSubmitMutation = { submitTasks: { batchId: string | null, items: Array<{ key: string | null, task: { id: string } | null, error: { code: ErrorCode, message: string } | null }> } };

export type AgentFollowSubscriptionVariables = Exact<{
  b: string | number;
  after?: number | null | undefined;
}>;


export type AgentFollowSubscription = { taskEventFeed: { events: unknown, lastSeq: number } };

export type AgentResultsQueryVariables = Exact<{
  id: string | number;
}>;


export type AgentResultsQuery = { batch: { tasks: { nodes: Array<{ id: string, state: TaskState, result: unknown, error: string | null }> } } | null };
