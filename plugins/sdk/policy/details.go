package policy

import (
	"encoding/binary"
	"iter"
	"slices"
	"strings"
)

// Details gives the names and labels behind a decision's records, by record
// index (ABI v2): task i of a selection, candidate i of a fairness decision
// (its head task, and its agent), record 0 of a retry decision. A plugin
// sees them when it registers with sdk.Details; the engine gives them to
// every policy that implements DetailedSelection or DetailedRetry, and to
// every fairness policy (PickContext.Details). Strings and labels returned
// are valid during the call only.
type Details interface {
	Names
	// Session returns the task's session key ("" when it has none).
	Session(i int) string
	// Labels returns the task's labels.
	Labels(i int) Labels
	// Agent returns what is configured for the task's agent.
	Agent(i int) AgentInfo
	// ErrorCode returns the failed attempt's error code, as the executor
	// reported it (a retry decision only; "" when there is none).
	ErrorCode(i int) string
}

// AgentInfo is what is configured for an agent: its weight, its
// concurrency ceiling and its labels (setAgent, or the server's
// configuration).
type AgentInfo struct {
	Weight      uint32 // share of concurrency relative to other agents, at least 1
	MaxInFlight uint32 // the agent's concurrency ceiling
	Labels      Labels
}

// RankContext carries the parameters of one selection decision made by a
// DetailedSelection.
type RankContext struct {
	NowMs int64 // the engine clock, Unix milliseconds
	// Details tells whose each task is and what it carries (ABI v2); nil
	// when the caller has none to give.
	Details Details
}

// DetailedSelection is a Selection that also reads the tasks' details (their
// agents' ids and labels, their lanes' names, sessions and labels). The
// engine calls RankDetailed instead of Rank.
type DetailedSelection interface {
	Selection
	RankDetailed(ctx RankContext, tasks []Task, ranks []int64)
}

// RetryContext carries the details of one retry decision made by a
// DetailedRetry.
type RetryContext struct {
	// Details tells whose the failed task is, what it carries and the
	// error code of the attempt (record 0); nil when the caller has none.
	Details Details
}

// DetailedRetry is a Retry that also reads the failed task's details. The
// engine calls DecideDetailed instead of Decide.
type DetailedRetry interface {
	Retry
	DecideDetailed(ctx RetryContext, f Failure) Decision
}

// Labels is a set of key=value labels, sorted by key, held in the ABI's
// wire format (plugins/ABI.md, "Labels"): for each label, u32 key length,
// u32 value length, the key's bytes, the value's bytes. The zero value is
// the empty set. Reading a Labels allocates nothing.
type Labels string

// MakeLabels returns the labels of m.
func MakeLabels(m map[string]string) Labels {
	if len(m) == 0 {
		return ""
	}
	keys := make([]string, 0, len(m))
	n := 0
	for k, v := range m {
		keys = append(keys, k)
		n += 8 + len(k) + len(v)
	}
	slices.Sort(keys)
	var b strings.Builder
	b.Grow(n)
	var hdr [8]byte
	for _, k := range keys {
		v := m[k]
		binary.LittleEndian.PutUint32(hdr[0:], uint32(len(k)))
		binary.LittleEndian.PutUint32(hdr[4:], uint32(len(v)))
		b.Write(hdr[:])
		b.WriteString(k)
		b.WriteString(v)
	}
	return Labels(b.String())
}

// All yields each label, in key order. It stops at the first malformed
// entry.
func (ls Labels) All() iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		s := string(ls)
		for len(s) >= 8 {
			kl, vl := u32(s), u32(s[4:])
			if uint64(len(s)-8) < kl+vl {
				return
			}
			k, v := s[8:8+kl], s[8+kl:8+kl+vl]
			s = s[8+kl+vl:]
			if !yield(k, v) {
				return
			}
		}
	}
}

// Get returns the value of the label key, and whether there is one.
func (ls Labels) Get(key string) (string, bool) {
	for k, v := range ls.All() {
		if k == key {
			return v, true
		}
	}
	return "", false
}

// Len returns the number of labels.
func (ls Labels) Len() int {
	n := 0
	for range ls.All() {
		n++
	}
	return n
}

// Map returns the labels as a map (nil when there are none).
func (ls Labels) Map() map[string]string {
	var m map[string]string
	for k, v := range ls.All() {
		if m == nil {
			m = map[string]string{}
		}
		m[k] = v
	}
	return m
}

// u32 reads a little-endian uint32 at the start of s (at least 4 bytes).
func u32(s string) uint64 {
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24
}
