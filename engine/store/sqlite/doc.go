// Package sqlite is the embedded durable store: one SQLite file in WAL mode,
// written through the pure-Go driver github.com/ncruces/go-sqlite3 (see
// doc/adr/0001-sqlite-driver.md for why this driver and these settings).
//
// Layout (migrations/ holds the schema, applied at Open and recorded in
// schema_migrations):
//
//   - tasks: one row per task, keyed by seq (the rowid, so keyset pages walk
//     the table in order). The filter columns (agent, lane, session, batch,
//     parent, state, the idempotency key) are indexed; ended_at is set
//     exactly for terminal tasks and indexed for retention. The spec and the
//     mutable status are JSON; params and results are kept verbatim.
//   - events: chunks of consecutive events, one row per group commit.
//   - batches, lanes, settings, and meta (the last event seq, which outlives
//     purged events).
//
// Commits are serialised on one writer connection (one transaction per
// engine batch: group commit, its new tasks sixteen to a statement);
// reads use a pool of reader connections that never wait for the writer.
// A background goroutine checkpoints the WAL so
// that commits do not pay for it, finishing under the writer's lock when
// commits overtook it, so that the next commit restarts the log. With
// Options.PreallocateWAL the log's file is written out at open, so that
// commits rewrite its blocks rather than grow it (a cheaper flush).
//
// Ownership: one Store has a file open at a time, in this process or any
// other, through an flock on the file's name plus ".lock" that the kernel
// drops with the process (lock.go). At Open the bookkeeping is checked
// against the rows: what is certain is repaired, the rest refuses the file
// until an operator runs Repair (check.go; `switchyard db check|repair`).
//
// Durability: with the default SyncFull a commit returns once the WAL is on
// disk, so an accepted task survives a crash of the machine, not only of
// the process. SyncNormal keeps process-crash durability and may lose the
// last commits on power loss.
package sqlite
