CREATE TABLE tasks (
  seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE,
  agent TEXT NOT NULL, lane TEXT NOT NULL, session TEXT, batch TEXT, parent TEXT, idem_key TEXT,
  state INTEGER NOT NULL, ended_at INTEGER, spec BLOB NOT NULL, status BLOB NOT NULL, events BLOB NOT NULL
);
CREATE INDEX tasks_agent ON tasks(agent);
CREATE INDEX tasks_lane ON tasks(lane);
CREATE INDEX tasks_state ON tasks(state);
CREATE INDEX tasks_session ON tasks(session) WHERE session IS NOT NULL;
CREATE INDEX tasks_batch ON tasks(batch) WHERE batch IS NOT NULL;
CREATE INDEX tasks_parent ON tasks(parent) WHERE parent IS NOT NULL;
CREATE UNIQUE INDEX tasks_idem ON tasks(agent, idem_key) WHERE idem_key IS NOT NULL;
CREATE INDEX tasks_ended ON tasks(ended_at) WHERE ended_at IS NOT NULL;
CREATE TABLE events (seq INTEGER PRIMARY KEY, task_id TEXT, data BLOB NOT NULL);
