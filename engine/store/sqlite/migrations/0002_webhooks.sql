-- Batches record when their last task ended and their webhook deliveries.
ALTER TABLE batches ADD COLUMN ended_at INTEGER NOT NULL DEFAULT 0;
ALTER TABLE batches ADD COLUMN webhooks TEXT;   -- JSON array of deliveries, NULL when none
