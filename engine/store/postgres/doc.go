// Package postgres is the store for several Switchyard nodes on one
// PostgreSQL database (doc/architecture.md, "Several nodes"), through pgx v5 and its pool. It is an
// engine.Store that passes the conformance suite in engine/store/storetest,
// and it holds the pieces a cluster is built from; see
// doc/adr/0003-postgres-multi-node.md for the reasons behind them.
//
//	node A (leader)                         node B (follower)
//	engine ──Commit──▶ tasks, events ◀──read── Follow ──▶ subscribers
//	   ▲    (fenced)    NOTIFY events ────────▶ (LISTEN)
//	   │
//	TakeCommands ◀──── commands ◀──SubmitCommand── submissions, cancels, …
//	CompleteCommand ─▶ commands ───AwaitCommand──▶ the leader's answer
//	Broadcast ──▶ NOTIFY broadcast ──▶ Broadcasts (on every node, A included)
//	Elector ───▶ leases ◀─── Elector (campaigns)
//	Heartbeat ─▶ nodes  ◀─── Heartbeat
//
// Layout (migrations/ holds the schema, applied at Open under an advisory
// lock and recorded in switchyard_migrations):
//
//   - tasks: what never changes after a task's first commit (id, the filter
//     columns, labels, the spec, and possibly its first event: the state
//     it was admitted in), keyed by seq, with an index per filter that ends
//     with seq so that every filtered page is an ordered index scan;
//     task_status: what changes (state, ended_at, status JSON, result, the
//     seqs of its events), a narrow row with three indexes, because
//     PostgreSQL writes every index again at each update.
//   - events: one row per event, but for the first events of tasks written
//     by COPY, which are in the tasks' rows (migration 0005; Events merges
//     the two in seq order; while a node of an older build, which reads
//     events only, may still be running, commits keep them here:
//     checkOlderReaders); batches, lanes, settings; meta (the last event
//     seq, which outlives purged events).
//   - leases (leader election), nodes (heartbeats), commands (what
//     followers ask of the leader: submissions and changes).
//
// Each engine batch is one pgx.Batch: one round trip, one implicit
// transaction, one statement per table with the rows as arrays. It checks
// the seq order first, notifies followers, and checks the fence (the lease
// epoch this node leads under) last, just before it commits.
//
// Followers send submissions and changes (cancel a task, update a lane, …) as
// commands; the leader applies them through its engine and answers each with
// a result or an error. A submission carries the task ids its follower
// chose, so a command applied twice (by a leader that died before answering,
// then by its successor) yields the same tasks.
package postgres
