// Package failing logs a failure that repeats — a retry loop against a
// database that is down, a read every request makes — by its changes of
// state instead of by its attempts: the first failure of a run, a reminder
// once a minute while the run lasts, and the success that ends it. An
// outage of minutes then writes a handful of lines, not one per attempt or
// per request.
package failing

import (
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// DefaultEvery is how often a run of failures is logged again while it lasts.
const DefaultEvery = time.Minute

// State is one repeating operation's state: failing or not. The zero value
// is ready to use (not failing, reminders every DefaultEvery). Safe for
// concurrent use.
type State struct {
	// Every is how often a run of failures is logged again (0: DefaultEvery).
	Every time.Duration

	mu      sync.Mutex
	failing bool
	since   time.Time
	count   int
	logged  time.Time
	now     func() time.Time // tests
}

func (s *State) clock() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now()
}

// Fail records a failure and logs msg at level when it starts a run of
// failures, or when the run has gone on for Every since it was last
// logged (then with how long it has lasted and how many failures it has
// counted). It reports whether it logged.
func (s *State) Fail(log hclog.Logger, level hclog.Level, msg string, args ...any) bool {
	s.mu.Lock()
	now := s.clock()
	every := s.Every
	if every <= 0 {
		every = DefaultEvery
	}
	first := !s.failing
	if first {
		s.failing, s.since, s.count = true, now, 0
	}
	s.count++
	remind := !first && now.Sub(s.logged) >= every
	if first || remind {
		s.logged = now
	}
	since, count := s.since, s.count
	s.mu.Unlock()
	switch {
	case first:
		log.Log(level, msg, args...)
	case remind:
		log.Log(level, msg+" (still failing)", append(args, "for", now.Sub(since).Round(time.Millisecond), "failures", count)...)
	default:
		return false
	}
	return true
}

// OK records a success. When it ends a run of failures it logs msg at Info
// with how long the run lasted and how many failures it counted, and
// reports true.
func (s *State) OK(log hclog.Logger, msg string, args ...any) bool {
	s.mu.Lock()
	if !s.failing {
		s.mu.Unlock()
		return false
	}
	since, count := s.since, s.count
	s.failing = false
	now := s.clock()
	s.mu.Unlock()
	log.Info(msg, append(args, "after", now.Sub(since).Round(time.Millisecond), "failures", count)...)
	return true
}

// Failing reports whether the last outcome was a failure, since when the
// run of failures has lasted and how many failures it has counted.
func (s *State) Failing() (failing bool, since time.Time, count int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failing, s.since, s.count
}
