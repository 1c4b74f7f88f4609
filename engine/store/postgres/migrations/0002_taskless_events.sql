-- Events of no task (lane and engine events) are purged by age; this index
-- finds them without reading the events of tasks.
CREATE INDEX events_taskless ON events (seq) WHERE task IS NULL;
