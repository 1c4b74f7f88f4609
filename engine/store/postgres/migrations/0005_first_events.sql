-- A task's first event (the state it was admitted in) is written in the
-- task's row rather than as a row of events when its commit writes by COPY:
-- one heap row and one index entry fewer for every new task of a large
-- batch (ADR 0005, finding 30). Events reads both: the events rows, and the
-- tasks rows whose first_at is set, in seq order. A task committed before
-- this version or by a small commit, or whose first event is of another
-- shape, keeps its first event in events (first_at NULL).
ALTER TABLE tasks
  ADD COLUMN first_at      bigint,   -- the event's time; NULL: the event is a row of events
  ADD COLUMN first_to      smallint, -- the state the task was admitted in
  ADD COLUMN first_reason  bytea,
  ADD COLUMN first_webhook boolean;

-- The schema version each node's build knows, written with its heartbeat
-- (0: a build before this version, which reads first events from events
-- only). A leader writes first events in the tasks' rows only while no node
-- of such a build has reported lately.
ALTER TABLE nodes ADD COLUMN schema_version integer NOT NULL DEFAULT 0;
