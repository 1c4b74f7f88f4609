// Package mcp serves Switchyard to AI agents as a Model Context Protocol
// server (Streamable HTTP transport, built on the official Go SDK): its
// browser tools are tasks, scheduled like every other task — lanes,
// per-agent fairness and ceilings, rate limits, roles and events all hold.
//
// It translates MCP into the GraphQL resolvers' own calls, so that an MCP
// call is validated, authorized (row level) and submitted exactly as the
// same GraphQL mutation would be:
//
//	MCP client ──POST /mcp──▶ graph/server: the bearer token → identity (role, agentId)
//	                              │
//	                              ▼
//	                          this package: tool call → access table (graph/auth) → rate limit
//	                              │          → SubmitTaskInput → resolvers.SubmitTask (validation, row-level rules)
//	                              │          → wait on the engine's event log (progress notifications)
//	                              │          → the task's end → MCP content (text, image, structured error)
//	                              ▼
//	                          engine ── executor ── browser instance
//
// # Tools
//
// Browser tools (navigate, click, hover, fill, type, press, select, check,
// uncheck, scroll, text, snapshot, screenshot, evaluate, and back, forward,
// reload and wait where the instances serve them) each submit one
// task under the caller's agent and browser session, wait for it to end and
// return its result: text for text (at most maxChars characters, default
// 100,000: a text cut short says so) and snapshot results, an image for
// screenshots, and for a task that fails an error result (isError) whose
// structured content carries the task's state, error class, HTTP status and
// the instance's own error code. Their tasks are submitted with exhausted
// FAIL: a call answers once its task's retries are spent, and leaves no
// PARKED task behind that an operator's reset would run in the agent's tab
// later. While the task waits, progress notifications say where it stands
// and name it ("task 01J…: queued in lane main, 2 tasks ahead", the tasks
// ahead of it as GraphQL's Task.position counts them, "task 01J…: running
// on instance local (attempt 1), 30 s"), at each change and at least every
// ProgressEvery, so that clients whose request timeout restarts on
// progress keep waiting; a client that cancels the call cancels the task,
// and gets no response for the call (withhold.go); a client that
// terminates its MCP session (DELETE) cancels every call of the session
// (terminate.go).
//
// Scheduler tools: submit_task (any SubmitTaskInput, without waiting),
// get_task, list_tasks (the caller's agent's; every task for a reader,
// operator or admin token naming no agent), cancel_task; session tools:
// open_session, close_session. Resources: switchyard://tasks/{id} (a task's
// state and result) and switchyard://artifacts/{id} (screenshots, PDFs,
// large results).
//
// # Sessions
//
// Each MCP session has a browser session of its own: tasks share its
// sessionKey, so consecutive calls run in order in one tab. A call may name
// another session ("session" argument); open_session starts a fresh one and
// makes it the MCP session's current one; close_session closes its tab (a
// session with no tab is left alone). MCP sessions live in memory: after a
// restart their clients must initialize again, while the tasks remain. A
// request without a session, other than initialize or ping, is a 400 that
// says to initialize (sessionless.go). At most Options.MaxSessions sessions
// live at once: a new one evicts the least recently used idle session (no
// call in progress), or is refused with 503 when none is idle; a session
// that sends nothing after initialize closes after Options.InitTimeout; and
// initialize takes from the caller's mutation rate (sessions.go).
//
// # Who is calling
//
// With tokens, the bearer token decides the role and, for agent tokens, the
// agent. Admin and operator tokens, and every caller when authentication is
// off (loopback only), name their agent in the X-Switchyard-Agent header,
// else the MCP client's name (clientInfo.name) is the agent. A browser on
// another origin is refused (403, net/http's cross-origin protection)
// unless its origin is one of Options.AllowedOrigins (origin.go).
//
// # Errors
//
// Following the MCP specification: an unknown tool is a protocol error
// (JSON-RPC invalid params); arguments that do not match a tool's input
// schema (checked here, before the handler: INVALID_INPUT naming the
// argument), an invalid selector, a refusal (FORBIDDEN, RATE_LIMITED,
// QUEUE_FULL, …) and a task that fails are tool errors (isError results the
// model can read and act on), with the API's error code in the structured
// content. Nothing is submitted for a call refused before submission, and
// each such refusal of a tool that submits or cancels is audited, as its
// calls that get a task are (addAuditedTool). A string in the arguments
// that is not UTF-8 is such an INVALID_INPUT too (checkArgs reads the raw
// arguments, which graph/server leaves to it); the rest of a request is
// checked by graph/server, which answers what it refuses (such a string
// elsewhere, a body too large or too slow, no token) as JSON-RPC. An
// X-Switchyard-Agent header, or a client name standing for the agent, that
// is not an agent id fails every call naming the header and what is wrong.
package mcp
