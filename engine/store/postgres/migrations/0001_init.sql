-- The first schema of the PostgreSQL store. See doc.go for what each table
-- holds and why it is shaped so.
--
-- Strings that come from clients (ids, agents, sessions, reasons, …) are
-- bytea, not text: PostgreSQL's text refuses NUL and invalid UTF-8, which Go
-- strings may hold, and a batch the store cannot write would stall the
-- engine. bytea also compares bytewise, without a collation. Read them with
-- convert_from(col, 'UTF8'). Times are unix nanoseconds (0 or NULL for none):
-- timestamptz keeps microseconds only.

-- What never changes after a task's first commit: its identity, the columns
-- the API filters on (each index ends with seq, so a filtered keyset page is
-- an ordered index scan) and its spec.
CREATE TABLE tasks (
  seq      bigint PRIMARY KEY,   -- submission order: the seq of its first event
  id       bytea  NOT NULL UNIQUE,
  agent    bytea  NOT NULL,
  lane     bytea  NOT NULL,
  session  bytea,                -- Spec.Session(): the session key, or the tab
  batch    bytea,
  parent   bytea,
  idem_key bytea,
  labels   bytea[],              -- one element per label: uvarint(len(key)) key value
  spec     bytea  NOT NULL,      -- JSON (codec.go), without the params
  params   bytea                 -- Spec.Action.Params, verbatim
);
CREATE INDEX tasks_agent   ON tasks (agent, seq);
CREATE INDEX tasks_lane    ON tasks (lane, seq);
CREATE INDEX tasks_session ON tasks (session, seq) WHERE session IS NOT NULL;
CREATE INDEX tasks_batch   ON tasks (batch, seq)   WHERE batch IS NOT NULL;
CREATE INDEX tasks_parent  ON tasks (parent, seq)  WHERE parent IS NOT NULL;
CREATE INDEX tasks_idem    ON tasks (agent, idem_key) WHERE idem_key IS NOT NULL;
CREATE INDEX tasks_labels  ON tasks USING gin (labels) WHERE labels IS NOT NULL;

-- What changes over a task's life, apart from its identity: a narrow row
-- with few indexes, because PostgreSQL writes a new row version (and an
-- entry in every index) at each update.
CREATE TABLE task_status (
  seq        bigint   PRIMARY KEY,
  state      smallint NOT NULL,
  ended_at   bigint,                       -- set exactly when the state is terminal
  status     bytea    NOT NULL,            -- JSON (codec.go)
  result     bytea,                        -- verbatim
  event_seqs bigint[] NOT NULL DEFAULT '{}' -- the task's events, for purging them
) WITH (fillfactor = 85);
CREATE INDEX task_status_state ON task_status (state, seq);
CREATE INDEX task_status_ended ON task_status (ended_at) WHERE ended_at IS NOT NULL;

-- One row per event, as engine.Event has it.
CREATE TABLE events (
  seq        bigint   PRIMARY KEY,
  at         bigint   NOT NULL,
  type       smallint NOT NULL,
  task       bytea,
  agent      bytea,
  lane       bytea,
  session    bytea,
  batch      bytea,
  from_state smallint NOT NULL,
  to_state   smallint NOT NULL,
  attempt    integer  NOT NULL,
  reason     bytea,
  webhook    boolean  NOT NULL
);

CREATE TABLE batches (
  id          bytea   PRIMARY KEY,
  parallelism integer NOT NULL,
  webhook_url bytea,
  created_at  bigint  NOT NULL,
  ended_at    bigint  NOT NULL,
  webhooks    bytea                   -- JSON array of deliveries
);

CREATE TABLE lanes (
  name   text  PRIMARY KEY,
  config bytea NOT NULL               -- JSON of engine.LaneConfig
);

CREATE TABLE settings (
  key   text  PRIMARY KEY,
  value bytea NOT NULL
);

-- Counters that outlive the rows they count: last_seq survives a purge of
-- every event.
CREATE TABLE meta (
  key   text   PRIMARY KEY,
  value bigint NOT NULL
);
INSERT INTO meta (key, value) VALUES ('last_seq', 0);

-- Leader election: one row per lease. epoch grows at every takeover; times
-- are the database's clock, so nodes never compare their own clocks.
CREATE TABLE leases (
  name        text        PRIMARY KEY,
  node        text        NOT NULL,
  epoch       bigint      NOT NULL,
  acquired_at timestamptz NOT NULL,
  renewed_at  timestamptz NOT NULL,
  expires_at  timestamptz NOT NULL
);

-- The nodes that share this schema, with their last heartbeat.
CREATE TABLE nodes (
  id           text        PRIMARY KEY,
  address      text        NOT NULL DEFAULT '',
  role         text        NOT NULL DEFAULT '',
  since        timestamptz,
  heartbeat_at timestamptz NOT NULL,
  version      text        NOT NULL DEFAULT '',
  health       bytea                    -- JSON, as the node reports it
);

-- Commands from followers for the leader (submissions, cancels, lane
-- updates, …); the payload and result are the caller's JSON.
CREATE TABLE commands (
  id         bigserial   PRIMARY KEY,
  node       text        NOT NULL,
  kind       text        NOT NULL,
  payload    bytea       NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  done_at    timestamptz,
  result     bytea,
  error      text
);
CREATE INDEX commands_pending ON commands (id) WHERE done_at IS NULL;
CREATE INDEX commands_done    ON commands (done_at) WHERE done_at IS NOT NULL;

-- sy_fence refuses the transaction unless node holds epoch of the lease and
-- the lease has not expired. FOR SHARE makes a takeover wait for the
-- transaction (or the transaction see the takeover): a commit is fenced
-- against the lease as it is when the commit happens.
CREATE FUNCTION sy_fence(p_lease text, p_node text, p_epoch bigint) RETURNS void
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  PERFORM 1 FROM leases
    WHERE name = p_lease AND node = p_node AND epoch = p_epoch AND expires_at > now()
    FOR SHARE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'node % does not hold epoch % of lease %', p_node, p_epoch, p_lease
      USING ERRCODE = 'SY001';
  END IF;
END $$;

-- sy_advance moves the last committed event seq to p_last, refusing the
-- transaction unless p_first follows it. The row lock serialises commits.
CREATE FUNCTION sy_advance(p_first bigint, p_last bigint) RETURNS void
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
  prev bigint;
BEGIN
  SELECT value INTO prev FROM meta WHERE key = 'last_seq' FOR UPDATE;
  IF prev >= p_first THEN
    RAISE EXCEPTION 'event seq % does not follow the last committed seq %', p_first, prev
      USING ERRCODE = 'SY002';
  END IF;
  UPDATE meta SET value = p_last WHERE key = 'last_seq';
END $$;
