// Zero-copy paths. The v1 record layouts were chosen to be exactly the
// in-memory layout of the policy structs on a little-endian machine (Go
// aligns their fields the same way on amd64, arm64 and wasm), so each side
// can move a whole slice of records with one copy, or none, instead of
// field by field. That matters most inside a guarded guest, where every
// loop iteration costs a check. If the structs ever change shape, the
// constants below turn false and both sides fall back to the field-by-field
// code in records.go.

package abi

import (
	"encoding/binary"
	"unsafe"

	"github.com/switchyard/switchyard/plugins/sdk/policy"
)

var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

var (
	zc policy.Candidate
	zt policy.Task
)

// candidateLayoutNative is true when policy.Candidate's memory layout is the
// v1 candidate record.
const candidateLayoutNative = unsafe.Sizeof(zc) == CandidateSize &&
	unsafe.Offsetof(zc.HeadSeq) == 0 && unsafe.Offsetof(zc.HeadRank) == 8 &&
	unsafe.Offsetof(zc.HeadWaitMs) == 16 && unsafe.Offsetof(zc.HeadDeadlineMs) == 24 &&
	unsafe.Offsetof(zc.HeadPriority) == 32 && unsafe.Offsetof(zc.Agent) == 36 &&
	unsafe.Offsetof(zc.AgentInflight) == 40 && unsafe.Offsetof(zc.AgentLimit) == 44 &&
	unsafe.Offsetof(zc.AgentWeight) == 48 && unsafe.Offsetof(zc.Lane) == 52 &&
	unsafe.Offsetof(zc.LaneInflight) == 56 && unsafe.Offsetof(zc.LaneLimit) == 60 &&
	unsafe.Offsetof(zc.QueueLen) == 64

// taskLayoutNative is true when policy.Task's memory layout is the v1 task
// record.
const taskLayoutNative = unsafe.Sizeof(zt) == TaskSize &&
	unsafe.Offsetof(zt.Seq) == 0 && unsafe.Offsetof(zt.CreatedAtMs) == 8 &&
	unsafe.Offsetof(zt.DeadlineMs) == 16 && unsafe.Offsetof(zt.Priority) == 24 &&
	unsafe.Offsetof(zt.Agent) == 28 && unsafe.Offsetof(zt.Lane) == 32 &&
	unsafe.Offsetof(zt.Attempts) == 34 && unsafe.Offsetof(zt.Depth) == 36 &&
	unsafe.Offsetof(zt.Flags) == 40

// PutCandidates encodes cands as consecutive v1 records at the start of b.
// Reserved bytes are left unspecified.
func PutCandidates(b []byte, cands []policy.Candidate) {
	if candidateLayoutNative && littleEndian && len(cands) > 0 {
		copy(b, unsafe.Slice((*byte)(unsafe.Pointer(&cands[0])), len(cands)*CandidateSize))
		return
	}
	for i := range cands {
		PutCandidate(b[i*CandidateSize:], &cands[i])
	}
}

// PutTasks encodes tasks as consecutive v1 records at the start of b.
// Reserved bytes are left unspecified.
func PutTasks(b []byte, tasks []policy.Task) {
	if taskLayoutNative && littleEndian && len(tasks) > 0 {
		copy(b, unsafe.Slice((*byte)(unsafe.Pointer(&tasks[0])), len(tasks)*TaskSize))
		return
	}
	for i := range tasks {
		PutTask(b[i*TaskSize:], &tasks[i])
	}
}

// aligned reports whether b starts on an 8-byte boundary.
func aligned(b []byte) bool { return uintptr(unsafe.Pointer(&b[0]))%8 == 0 }

// Candidates returns the n records of recordSize bytes at the start of b as
// candidates: b itself, reinterpreted, when the layout allows it (v1 records
// on a little-endian machine, 8-aligned); otherwise decoded into *scratch,
// which is grown as needed and reused.
func Candidates(b []byte, recordSize uint32, n int, scratch *[]policy.Candidate) []policy.Candidate {
	if n == 0 {
		return (*scratch)[:0]
	}
	if candidateLayoutNative && littleEndian && recordSize == CandidateSize && aligned(b) {
		_ = b[n*CandidateSize-1]
		return unsafe.Slice((*policy.Candidate)(unsafe.Pointer(&b[0])), n)
	}
	if cap(*scratch) < n {
		*scratch = make([]policy.Candidate, n)
	}
	s := (*scratch)[:n]
	for i := range s {
		ReadCandidate(b[i*int(recordSize):], &s[i])
	}
	return s
}

// Tasks is Candidates for task records.
func Tasks(b []byte, recordSize uint32, n int, scratch *[]policy.Task) []policy.Task {
	if n == 0 {
		return (*scratch)[:0]
	}
	if taskLayoutNative && littleEndian && recordSize == TaskSize && aligned(b) {
		_ = b[n*TaskSize-1]
		return unsafe.Slice((*policy.Task)(unsafe.Pointer(&b[0])), n)
	}
	if cap(*scratch) < n {
		*scratch = make([]policy.Task, n)
	}
	s := (*scratch)[:n]
	for i := range s {
		ReadTask(b[i*int(recordSize):], &s[i])
	}
	return s
}

// Uint32s returns b's first n little-endian uint32s as a slice aliasing b,
// or nil when b is misaligned or the machine is big-endian.
func Uint32s(b []byte, n int) []uint32 {
	if n == 0 || !littleEndian || uintptr(unsafe.Pointer(&b[0]))%4 != 0 {
		return nil
	}
	_ = b[4*n-1]
	return unsafe.Slice((*uint32)(unsafe.Pointer(&b[0])), n)
}

// Int64s returns b's first n little-endian int64s as a slice aliasing b, or
// nil when b is misaligned or the machine is big-endian.
func Int64s(b []byte, n int) []int64 {
	if n == 0 || !littleEndian || !aligned(b) {
		return nil
	}
	_ = b[8*n-1]
	return unsafe.Slice((*int64)(unsafe.Pointer(&b[0])), n)
}

// bytesString returns b's bytes as a string without copying them: b must
// not change while the string is in use (an arena, during one call). b is
// not empty.
func bytesString(b []byte) string { return unsafe.String(&b[0], len(b)) }
