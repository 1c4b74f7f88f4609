package engine

import (
	"errors"

	"github.com/switchyard/switchyard/engine/policy"
)

// recordDetail is what a policy.Details tells of one record: the names and
// labels behind a task and its agent, copied under the lock so that a
// policy deciding outside it reads them safely.
type recordDetail struct {
	agent, lane, session, code string
	labels                     policy.Labels
	info                       policy.AgentInfo
}

// detailOf copies t's details; the lock is held. code is a failed
// attempt's error code, "" otherwise.
func detailOf(t *task, code string) recordDetail {
	a := t.agent
	return recordDetail{
		agent: a.id, lane: t.lane.cfg.Name, session: t.spec.Session(), code: code,
		labels: policy.MakeLabels(t.spec.Labels),
		info:   policy.AgentInfo{Weight: uint32(a.weight), MaxInFlight: uint32(a.limit), Labels: a.labels},
	}
}

// details is a policy.Details over copied records.
type details []recordDetail

func (d details) at(i int) *recordDetail {
	if i < 0 || i >= len(d) {
		return &recordDetail{}
	}
	return &d[i]
}

// AgentID implements policy.Names.
func (d details) AgentID(i int) string { return d.at(i).agent }

// LaneName implements policy.Names.
func (d details) LaneName(i int) string { return d.at(i).lane }

// Session implements policy.Details.
func (d details) Session(i int) string { return d.at(i).session }

// Labels implements policy.Details.
func (d details) Labels(i int) policy.Labels { return d.at(i).labels }

// Agent implements policy.Details.
func (d details) Agent(i int) policy.AgentInfo { return d.at(i).info }

// ErrorCode implements policy.Details.
func (d details) ErrorCode(i int) string { return d.at(i).code }

// Engine-made error codes of failed attempts (policy.Details.ErrorCode),
// for failures that have no code of the executor's.
const (
	CodeTimeout       = "timeout"        // the attempt ran past its timeout
	CodeLeaseExpired  = "lease_expired"  // the attempt's lease expired
	CodeRestart       = "restart"        // the server stopped (or the leader changed) while the attempt ran
	CodeInstanceFault = "instance_fault" // the browser instance failed, not the task
	codeNone          = ""
)

// ErrorCoder is implemented by an executor's error that carries a short,
// machine-readable code ("navigation_changed", say): a retry policy sees it
// as the attempt's error code (policy.Details.ErrorCode).
type ErrorCoder interface {
	ErrorCode() string
}

// errorCode returns a failed attempt's error code: the outcome's own, else
// the first in its error's chain, else one the engine makes.
func errorCode(t *task, o Outcome) string {
	if o.Code != "" {
		return o.Code
	}
	if t.timedOut {
		return CodeTimeout
	}
	var c ErrorCoder
	if errors.As(o.Err, &c) {
		if code := c.ErrorCode(); code != "" {
			return code
		}
	}
	if errors.Is(o.Err, ErrInstanceFault) {
		return CodeInstanceFault
	}
	return codeNone
}
