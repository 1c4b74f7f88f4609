-- The first schema of the SQLite store. See doc.go for what each table holds
-- and why it is shaped so.

-- One row per task. The columns the API filters on are columns with indexes
-- (each index also orders by seq, the rowid, for keyset pages); the spec and
-- the mutable status are JSON documents; params and result are kept byte for
-- byte in their own columns.
CREATE TABLE tasks (
  seq        INTEGER PRIMARY KEY,     -- submission order: the seq of its first event
  id         TEXT    NOT NULL UNIQUE,
  agent      TEXT    NOT NULL,
  lane       TEXT    NOT NULL,
  session    TEXT,                    -- Spec.Session(): the session key, or the tab
  batch      TEXT,
  parent     TEXT,
  idem_key   TEXT,
  state      INTEGER NOT NULL,
  ended_at   INTEGER,                 -- unix ns; set exactly when the state is terminal
  spec       TEXT    NOT NULL,        -- JSON, written once
  params     BLOB,                    -- Spec.Action.Params, verbatim
  status     TEXT    NOT NULL,        -- JSON: reason, attempts, times, counters
  result     BLOB,                    -- verbatim
  event_seqs BLOB                     -- uvarints: the seqs of the task's events, for purging them
);
CREATE INDEX tasks_agent   ON tasks(agent);
CREATE INDEX tasks_lane    ON tasks(lane);
CREATE INDEX tasks_state   ON tasks(state);
CREATE INDEX tasks_session ON tasks(session) WHERE session IS NOT NULL;
CREATE INDEX tasks_batch   ON tasks(batch)   WHERE batch IS NOT NULL;
CREATE INDEX tasks_parent  ON tasks(parent)  WHERE parent IS NOT NULL;
CREATE UNIQUE INDEX tasks_idem ON tasks(agent, idem_key) WHERE idem_key IS NOT NULL;
CREATE INDEX tasks_ended   ON tasks(ended_at) WHERE ended_at IS NOT NULL;

-- Events, in chunks of consecutive seqs: one row per group commit (split at
-- a bounded size), keyed by the seq of its first event. A row per event
-- would cost four B-tree inserts per task; a chunk costs one per commit.
CREATE TABLE events (
  first_seq INTEGER PRIMARY KEY,
  last_seq  INTEGER NOT NULL,
  data      BLOB    NOT NULL          -- see codec.go
);

CREATE TABLE batches (
  id          TEXT    PRIMARY KEY,
  parallelism INTEGER NOT NULL,
  webhook_url TEXT    NOT NULL,
  created_at  INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE lanes (
  name   TEXT PRIMARY KEY,
  config TEXT NOT NULL                -- JSON
) WITHOUT ROWID;

CREATE TABLE settings (
  key   TEXT PRIMARY KEY,
  value BLOB NOT NULL
) WITHOUT ROWID;

-- Counters that must outlive the rows they count: last_seq survives a purge
-- of every event.
CREATE TABLE meta (
  key   TEXT PRIMARY KEY,
  value INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO meta(key, value) VALUES ('last_seq', 0);
