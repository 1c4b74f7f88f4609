// Encoding and decoding of the fixed-width records. A record is never shorter
// than its v1 size; a newer host may lengthen it by appending fields, so a
// reader steps through records by the header's RecordSize and decodes only
// the fields it knows.

package abi

import (
	"encoding/binary"

	"github.com/switchyard/switchyard/plugins/sdk/policy"
)

var le = binary.LittleEndian

// PutTask encodes t into b[:TaskSize].
func PutTask(b []byte, t *policy.Task) {
	_ = b[TaskSize-1]
	le.PutUint64(b[0:], t.Seq)
	le.PutUint64(b[8:], uint64(t.CreatedAtMs))
	le.PutUint64(b[16:], uint64(t.DeadlineMs))
	le.PutUint32(b[24:], uint32(t.Priority))
	le.PutUint32(b[28:], t.Agent)
	le.PutUint16(b[32:], t.Lane)
	le.PutUint16(b[34:], t.Attempts)
	le.PutUint16(b[36:], t.Depth)
	le.PutUint16(b[38:], 0)
	le.PutUint32(b[40:], t.Flags)
	le.PutUint32(b[44:], 0)
}

// ReadTask decodes a task record of at least TaskSize bytes.
func ReadTask(b []byte, t *policy.Task) {
	_ = b[TaskSize-1]
	t.Seq = le.Uint64(b[0:])
	t.CreatedAtMs = int64(le.Uint64(b[8:]))
	t.DeadlineMs = int64(le.Uint64(b[16:]))
	t.Priority = int32(le.Uint32(b[24:]))
	t.Agent = le.Uint32(b[28:])
	t.Lane = le.Uint16(b[32:])
	t.Attempts = le.Uint16(b[34:])
	t.Depth = le.Uint16(b[36:])
	t.Flags = le.Uint32(b[40:])
}

// PutCandidate encodes c into b[:CandidateSize].
func PutCandidate(b []byte, c *policy.Candidate) {
	_ = b[CandidateSize-1]
	le.PutUint64(b[0:], c.HeadSeq)
	le.PutUint64(b[8:], uint64(c.HeadRank))
	le.PutUint64(b[16:], uint64(c.HeadWaitMs))
	le.PutUint64(b[24:], uint64(c.HeadDeadlineMs))
	le.PutUint32(b[32:], uint32(c.HeadPriority))
	le.PutUint32(b[36:], c.Agent)
	le.PutUint32(b[40:], c.AgentInflight)
	le.PutUint32(b[44:], c.AgentLimit)
	le.PutUint32(b[48:], c.AgentWeight)
	le.PutUint16(b[52:], c.Lane)
	le.PutUint16(b[54:], 0)
	le.PutUint32(b[56:], c.LaneInflight)
	le.PutUint32(b[60:], c.LaneLimit)
	le.PutUint32(b[64:], c.QueueLen)
	le.PutUint32(b[68:], 0)
}

// ReadCandidate decodes a candidate record of at least CandidateSize bytes.
func ReadCandidate(b []byte, c *policy.Candidate) {
	_ = b[CandidateSize-1]
	c.HeadSeq = le.Uint64(b[0:])
	c.HeadRank = int64(le.Uint64(b[8:]))
	c.HeadWaitMs = int64(le.Uint64(b[16:]))
	c.HeadDeadlineMs = int64(le.Uint64(b[24:]))
	c.HeadPriority = int32(le.Uint32(b[32:]))
	c.Agent = le.Uint32(b[36:])
	c.AgentInflight = le.Uint32(b[40:])
	c.AgentLimit = le.Uint32(b[44:])
	c.AgentWeight = le.Uint32(b[48:])
	c.Lane = le.Uint16(b[52:])
	c.LaneInflight = le.Uint32(b[56:])
	c.LaneLimit = le.Uint32(b[60:])
	c.QueueLen = le.Uint32(b[64:])
}

// PutFailure encodes f into b[:FailureSize].
func PutFailure(b []byte, f *policy.Failure) {
	_ = b[FailureSize-1]
	le.PutUint64(b[0:], uint64(f.NowMs))
	le.PutUint64(b[8:], f.TaskSeq)
	le.PutUint64(b[16:], uint64(f.CreatedAtMs))
	le.PutUint64(b[24:], uint64(f.DeadlineMs))
	le.PutUint64(b[32:], uint64(f.PrevDelayMs))
	le.PutUint64(b[40:], uint64(f.BaseDelayMs))
	le.PutUint64(b[48:], uint64(f.MaxDelayMs))
	le.PutUint32(b[56:], f.Multiplier)
	le.PutUint16(b[60:], f.Attempt)
	le.PutUint16(b[62:], f.MaxAttempts)
	le.PutUint16(b[64:], f.HTTPStatus)
	b[66] = byte(f.Class)
	b[67] = f.Flags
	le.PutUint32(b[68:], uint32(f.Priority))
	le.PutUint32(b[72:], f.Agent)
	le.PutUint16(b[76:], f.Lane)
	le.PutUint16(b[78:], 0)
	le.PutUint32(b[80:], f.LaneInflight)
	le.PutUint32(b[84:], 0)
}

// ReadFailure decodes a failure record of at least FailureSize bytes.
func ReadFailure(b []byte, f *policy.Failure) {
	_ = b[FailureSize-1]
	f.NowMs = int64(le.Uint64(b[0:]))
	f.TaskSeq = le.Uint64(b[8:])
	f.CreatedAtMs = int64(le.Uint64(b[16:]))
	f.DeadlineMs = int64(le.Uint64(b[24:]))
	f.PrevDelayMs = int64(le.Uint64(b[32:]))
	f.BaseDelayMs = int64(le.Uint64(b[40:]))
	f.MaxDelayMs = int64(le.Uint64(b[48:]))
	f.Multiplier = le.Uint32(b[56:])
	f.Attempt = le.Uint16(b[60:])
	f.MaxAttempts = le.Uint16(b[62:])
	f.HTTPStatus = le.Uint16(b[64:])
	f.Class = policy.ErrorClass(b[66])
	f.Flags = b[67]
	f.Priority = int32(le.Uint32(b[68:]))
	f.Agent = le.Uint32(b[72:])
	f.Lane = le.Uint16(b[76:])
	f.LaneInflight = le.Uint32(b[80:])
}
