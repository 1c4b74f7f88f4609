package storeerr

import (
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/switchyard/switchyard/internal/failing"
)

// Log logs the full errors whose store error Public withheld from a
// client, by their changes of state (internal/failing): the first of each
// kind (the kind is Describe's text), then a reminder once a minute while
// they go on. A kind not seen for a minute starts a new run. The zero
// value is ready to use; safe for concurrent use.
type Log struct {
	mu    sync.Mutex
	kinds map[string]*run
}

type run struct {
	state failing.State
	last  time.Time
}

// Withheld logs err, which a client was answered with Public(err), at Warn
// with what (where it was answered: "graphql", "readyz", …) and the
// request's id (internal/requestid; "" for none) unless an error of the same
// kind was logged within the last minute; those in between are logged at
// Debug, each with its request's id, when the log takes Debug. It does
// nothing for errors that hold no store error.
func (l *Log) Withheld(log hclog.Logger, what, requestID string, err error) {
	store, ok := find(err)
	if !ok || log == nil {
		return
	}
	kind := Describe(store)
	now := time.Now()
	l.mu.Lock()
	if l.kinds == nil {
		l.kinds = map[string]*run{}
	}
	r := l.kinds[kind]
	if r == nil || now.Sub(r.last) > failing.DefaultEvery {
		r = &run{}
		l.kinds[kind] = r
	}
	r.last = now
	l.mu.Unlock()
	args := []any{"answered", what}
	if requestID != "" {
		args = append(args, "request_id", requestID)
	}
	args = append(args, "public", kind, "error", err.Error())
	if !r.state.Fail(log, hclog.Warn, withheldMsg, args...) && log.IsDebug() {
		log.Debug(withheldMsg+" (again)", args...)
	}
}

const withheldMsg = "a client was told the database failed; the full error"
