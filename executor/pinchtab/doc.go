// Package pinchtab is a typed client for PinchTab's instance HTTP API, the
// protocol Switchyard speaks to every browser instance: its own built-in
// Chromium instance, a single PinchTab bridge, or a PinchTab server that fronts
// many browsers.
//
// The shapes follow PinchTab's public source and were verified against a real
// server:
//
//	GET  /health                        → {"status":"ok","tabs":N}                     (bridge)
//	                                    → {"status":"ok","mode":"dashboard","defaultInstance":{"id","status"}} (server)
//	GET  /tabs                          → {"tabs":[{"id","url","title","type"}]}       (single instance; no blank tab)
//	POST /tab {"action":"new","url"}    → {"tabId","url","title"}                       (single instance)
//	GET  /instances                     → [{"id","status",…}]                           (server)
//	GET  /instances/tabs?fresh=1        → [{"id","instanceId","url","title"}]           (server, bypassing its 1.5 s cache; no blank tab)
//	POST /instances/{id}/tabs/open {"url"} → {"tabId"}                                   (server)
//	POST /tabs/{id}/navigate {"url",…}  → {"tabId","url","title"}
//	POST /tabs/{id}/action {"kind","ref"|"selector",…} → {"success":true,"result":{…}}
//	GET  /tabs/{id}/text?selector=…     → {"url","title","text"}
//	GET  /tabs/{id}/snapshot            → {"url","title","nodes":[{"ref","role","name",…}],"count"}
//	GET  /tabs/{id}/screenshot?raw=true → image bytes (or {"format","base64"} without raw)
//	POST /tabs/{id}/evaluate {"expression"} → {"result":…}
//	POST /tabs/{id}/back|forward|reload → {"tabId","url"}
//	POST /tabs/{id}/wait {…}            → {"waited":true,"elapsed",…}, or 200 {"waited":false,"error"} when its time ran out
//	POST /tabs/{id}/find|dialog {…}     → the endpoint's JSON
//	POST /tabs/{id}/close               → {"closed":true}
//	POST /chat                          → text/event-stream; the last data event is the answer
//
// PinchTab's tab lists leave out the tabs that show no page (about:blank,
// chrome://…), though they are there: their routes answer, and a bridge's
// /health counts them. With a token set, PinchTab wants it on /health too.
//
// Every request carries "Authorization: Bearer <token>" and, when the context
// names one (WithRequestInfo), the agent and task ids as X-Switchyard-Agent and
// X-Switchyard-Task, and the milliseconds its attempt has left as
// X-Switchyard-Timeout. The request context's deadline and cancellation reach
// every request, and cancelling a chat aborts its stream.
//
// Failures are *Error values carrying the instance's status, code, message and
// "retryable" flag. Error.Retryable says whether retrying may help: an error
// body with a code decides by its flag; without one, network failures,
// timeouts, 408, 409, 423, 429 and 5xx may, 400, 404 and the other 4xx may
// not. Error.InstanceFault says whether the instance rather than the request
// failed (unreachable, 401, 503, a 502 from a server that cannot reach its
// browser), and Error.MayHaveRun whether the instance may have acted on the
// request all the same: the client notes whether each request was written
// whole to its connection (httptrace's WroteRequest; Error.Sent), which
// tells a connection refused or broken before that from one that broke
// after. A wait whose condition was not met in time answers 200, which
// Client.Wait returns as a *WaitTimeoutError (code wait_timeout). The token
// never appears in an error or a log line.
package pinchtab
