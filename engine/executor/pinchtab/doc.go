// Package pinchtab is a typed client for PinchTab's instance HTTP API, the
// protocol Switchyard speaks to every browser instance: its own built-in
// Chromium instance, a single PinchTab bridge, or a PinchTab server that fronts
// many browsers.
//
// The shapes follow PinchTab's public source and were verified against a real
// server:
//
//	GET  /health                        → {"status":"ok","tabs":N}
//	GET  /tabs                          → {"tabs":[{"id","url","title","type"}]}       (single instance)
//	POST /tab {"action":"new","url"}    → {"tabId","url","title"}                       (single instance)
//	GET  /instances                     → [{"id","status",…}]                           (server)
//	GET  /instances/tabs                → [{"id","instanceId","url","title"}]           (server)
//	POST /instances/{id}/tabs/open {"url"} → {"tabId"}                                   (server)
//	POST /tabs/{id}/navigate {"url",…}  → {"tabId","url","title"}
//	POST /tabs/{id}/action {"kind","ref"|"selector",…} → {"success":true,"result":{…}}
//	GET  /tabs/{id}/text?selector=…     → {"url","title","text"}
//	GET  /tabs/{id}/snapshot            → {"url","title","nodes":[{"ref","role","name",…}],"count"}
//	GET  /tabs/{id}/screenshot?raw=true → image bytes (or {"format","base64"} without raw)
//	POST /tabs/{id}/evaluate {"expression"} → {"result":…}
//	POST /tabs/{id}/close               → {"closed":true}
//	POST /chat                          → text/event-stream; the last data event is the answer
//
// Every request carries "Authorization: Bearer <token>" and, when the context
// names one (WithRequestInfo), the agent and task ids as X-Switchyard-Agent and
// X-Switchyard-Task. The request context's deadline and cancellation reach
// every request, and cancelling a chat aborts its stream.
//
// Failures are *Error values. Error.Retryable says whether retrying may help:
// network failures, timeouts, 408, 409, 423, 429 and 5xx may; 400, 404 and the
// other 4xx may not. The token never appears in an error or a log line.
package pinchtab
