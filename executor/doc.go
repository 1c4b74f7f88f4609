// Package executor carries tasks to browser instances. It implements
// engine.Executor over PinchTab's instance HTTP API and keeps the registry of
// instances the engine places work on.
//
//	engine ──Start(ctx, run)──▶ Executor ──▶ resolve the tab ──▶ pinchtab.Client ──HTTP──▶ instance
//	  ▲                            │            (cache, refreshed     (bearer token,
//	  │ SetInstance / Remove /     │             on a miss)            agent header,
//	  │ UnbindSession              │                                  ctx deadline)
//	  │                            ▼
//	  └──────────────────────── Registry ── health loop per instance (latency, N failures → unhealthy,
//	                               │         recovery) ── events for the instanceEvents subscription
//	                               └── tab → instance cache (GET /instances/tabs on servers, GET /tabs on instances)
//
// The engine decides where an attempt runs (run.InstanceID, run.TabID); the
// executor does the I/O:
//
//   - A task that names a tab runs on the instance that owns the tab, found in
//     the tab cache (refreshed on a miss). A tab whose instance was removed or
//     stopped answering is a permanent resolution error: the task asked for
//     that tab and no other will do. A tab the executor opened for another
//     agent's task (pooled, a session's, or a session's restored after a
//     restart) is refused before any request, as the built-in Chromium
//     refuses it at the instance: a *pinchtab.Error 404 tab_not_found, not
//     retryable, so the task fails permanently as for a tab that does not
//     exist, on every kind of instance (PinchTab's API knows no agents). An
//     instruction that names such a tab is refused alike. A tab the
//     executor did not open (an operator's own) is not any agent's: every
//     task that names it works it.
//   - A task whose session is bound to a tab runs there. While the tab's
//     instance is unhealthy the attempt is an instance fault (the task waits
//     for it); if the tab vanished or its instance was removed, the attempt
//     fails at once with ErrSessionLost (permanent), and the engine forgets
//     the binding.
//   - A task without a tab takes an idle tab from its instance's pool, or
//     opens one, and reports it in Started and in the Outcome; the engine
//     binds it to the task's session, if any. A tab-less task of no session
//     returns its tab to the pool (at most MaxIdleTabs idle per instance).
//     A pooled tab goes only to tasks of the agent it was opened for, and is
//     navigated to about:blank before each task that takes it, so that no
//     task reads what another left there. Sessions are kept under their
//     agent-scoped key (engine.TaskSpec.SessionScope).
//     Tabs the executor opened are closed after an idle timeout, and their
//     session is unbound (InstanceSink.UnbindSession).
//   - A cancelled or timed-out attempt keeps waiting for the instance's
//     answer for up to AbortGrace before it disconnects, so that its slot is
//     held until the instance's work has ended.
//   - Instruction tasks go to chat-style instances (POST /chat, Server-Sent
//     Events read to the end), in the instance's dialect: the generic
//     {"instruction","tabId"} or BrowserOS Core's {"conversationId",
//     "message",…} (DialectBrowserOS).
//
// Results: the instance's JSON answer becomes the outcome's Result.
// Screenshots, PDFs and answers larger than Options.MaxInlineResult (256 KiB
// of JSON; serve keeps the default) go to an artifact.Store and the Result
// carries a reference, {"artifact":{"id","contentType","size","sha256"},
// "kind"} ("screenshot", "pdf", or "result" for a large answer), never
// megabytes inline.
//
// Action kinds reach the instance through their own PinchTab routes
// (kinds.go; Kinds lists them per instance kind).
//
// Errors are classified for the engine's retry policy by the instance's own
// word: an error body with a code is transient exactly when it says
// "retryable": true; without a code, 400, 404 and other 4xx are permanent and
// 408, 409, 423, 429, 5xx, network failures and timeouts transient;
// cancellation is cancellation. A wait whose condition was not met within its
// own timeout, which the instance answers 200 {"waited":false}, fails the
// attempt with the code wait_timeout, transient as a timeout.
// A tab whose page stopped responding, which the built-in Chromium closes
// and answers 504 page_unresponsive (pinchtab.CodePageUnresponsive), leaves
// the executor's books, whenever the answer arrives: the attempt's error
// wraps engine.ErrInstanceGone (without saying "instance gone": the
// instance is fine), so that nothing binds to the tab; it is permanent for
// a task that needed the tab's page (its session's tab, a named tab) and
// transient for a task that had got the tab for itself, whose retry runs
// in a new tab (its text says so, not the instance's "not retryable"). A
// session bound to the tab is told: its binding goes with a SESSION event
// (InstanceSink.ExpireSession) and its next task starts in a new tab; or,
// when the answer came only after the attempt ended (the engine may have
// decided on a retry), the session lost its tab (InstanceSink.TabClosed),
// and its retry or next task fails with SESSION_LOST, or replays the
// session if it asked.
//
// An instance fault (unreachable, 401, 503, a server that cannot reach its
// browser) marks the instance unhealthy at once and wraps
// engine.ErrInstanceFault, so that the attempt does not spend the task's
// retry budget. When the fault ended the request that carries out the
// action (or instruction), and that request may have run
// (pinchtab.Error.MayHaveRun: the connection broke, or the answer never
// came, once the request was written; a server's 502 that does not show
// that its browser was never reached; a 503 that is not PinchTab's, from a
// proxy in front of it), the error also wraps
// engine.ErrMayHaveRun, which the engine does not forgive a task that
// allows a single attempt: its action runs at most once — unless the action
// only reads the tab (PinchTab's GET routes: text, snapshot, screenshot, …),
// which a second run does not repeat anything of. Faults that
// certainly did not reach the browser (a refused connection, a DNS or TLS
// failure, a request broken off before it was written whole, 401, the 503
// (with its error code) and the draining or restarting codes PinchTab
// answers before it acts, a
// server's 502 for a browser it could not connect to), and every fault of
// the requests before the action (finding, opening or blanking its tab),
// wrap engine.ErrInstanceFault alone: forgiven for every task. The built-in
// Chromium instance is reached through the same client, so the same holds
// for it (stopping it mid-action drops the action's connection after the
// request was sent).
//
// An instance is healthy only when it can run an action: /health is ok, a
// server's default browser runs, and the tab list answers with the
// registered token. Tokens never appear in logs or errors.
package executor
