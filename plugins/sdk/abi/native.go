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
	"unsafe"

	"github.com/switchyard/switchyard/plugins/sdk/policy"
)

var (
	zc policy.Candidate
	zt policy.Task
	zf policy.Failure
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

// failureLayoutNative is true when policy.Failure's memory layout is the v1
// failure record.
const failureLayoutNative = unsafe.Sizeof(zf) == FailureSize &&
	unsafe.Offsetof(zf.NowMs) == 0 && unsafe.Offsetof(zf.TaskSeq) == 8 &&
	unsafe.Offsetof(zf.CreatedAtMs) == 16 && unsafe.Offsetof(zf.DeadlineMs) == 24 &&
	unsafe.Offsetof(zf.PrevDelayMs) == 32 && unsafe.Offsetof(zf.BaseDelayMs) == 40 &&
	unsafe.Offsetof(zf.MaxDelayMs) == 48 && unsafe.Offsetof(zf.Multiplier) == 56 &&
	unsafe.Offsetof(zf.Attempt) == 60 && unsafe.Offsetof(zf.MaxAttempts) == 62 &&
	unsafe.Offsetof(zf.HTTPStatus) == 64 && unsafe.Offsetof(zf.Class) == 66 &&
	unsafe.Offsetof(zf.Flags) == 67 && unsafe.Offsetof(zf.Priority) == 68 &&
	unsafe.Offsetof(zf.Agent) == 72 && unsafe.Offsetof(zf.Lane) == 76 &&
	unsafe.Offsetof(zf.LaneInflight) == 80

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

// InPlace is true when, on this machine, the header and the v1 task,
// candidate and failure records are laid out in memory exactly as Header,
// policy.Task, policy.Candidate and policy.Failure: records at an 8-aligned
// address can then be used where they lie, as TasksInPlace,
// CandidatesInPlace and FailureInPlace do. It is a constant, so a test of
// it costs nothing.
const InPlace = littleEndian && headerLayoutNative && taskLayoutNative &&
	candidateLayoutNative && failureLayoutNative

// aligned reports whether b starts on an 8-byte boundary.
func aligned(b []byte) bool { return uintptr(unsafe.Pointer(&b[0]))%8 == 0 }

// The zero-copy views below reinterpret the arena through a pointer to an
// array of at most 2 GiB (the largest a 32-bit machine's compiler takes),
// sliced to n, rather than with unsafe.Slice: on wasm unsafe.Slice checks its length
// with a call to the runtime (math.MulUintptr is no intrinsic there), and
// inside a guest every call costs more than the rest of the view. Each
// view's fast path stays small enough to be inlined; the field-by-field
// decoding is a call of its own.
const (
	maxView       = 1<<31 - 1
	maxTasks      = maxView / TaskSize
	maxCandidates = maxView / CandidateSize
)

// Candidates returns the n records of recordSize bytes at the start of b as
// candidates: b itself, reinterpreted, when the layout allows it (v1 records
// on a little-endian machine, 8-aligned); otherwise decoded into *scratch,
// which is grown as needed and reused.
func Candidates(b []byte, recordSize uint32, n int, scratch *[]policy.Candidate) []policy.Candidate {
	if c := CandidatesInPlace(b, recordSize, n); c != nil {
		return c
	}
	return readCandidates(b, recordSize, n, scratch)
}

// CandidatesInPlace returns the n records of recordSize bytes at the start
// of b as candidates aliasing b when the layout allows it (see
// Candidates), and nil otherwise or when n is 0. It is Candidates' fast
// path, small enough for the compiler to inline into a guest's export.
func CandidatesInPlace(b []byte, recordSize uint32, n int) []policy.Candidate {
	if !candidateLayoutNative || !littleEndian || recordSize != CandidateSize || n <= 0 || !aligned(b) {
		return nil
	}
	_ = b[n*CandidateSize-1]
	return (*[maxCandidates]policy.Candidate)(unsafe.Pointer(&b[0]))[:n:n]
}

func readCandidates(b []byte, recordSize uint32, n int, scratch *[]policy.Candidate) []policy.Candidate {
	if n == 0 {
		return (*scratch)[:0]
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
	if t := TasksInPlace(b, recordSize, n); t != nil {
		return t
	}
	return readTasks(b, recordSize, n, scratch)
}

// TasksInPlace is CandidatesInPlace for task records.
func TasksInPlace(b []byte, recordSize uint32, n int) []policy.Task {
	if !taskLayoutNative || !littleEndian || recordSize != TaskSize || n <= 0 || !aligned(b) {
		return nil
	}
	_ = b[n*TaskSize-1]
	return (*[maxTasks]policy.Task)(unsafe.Pointer(&b[0]))[:n:n]
}

func readTasks(b []byte, recordSize uint32, n int, scratch *[]policy.Task) []policy.Task {
	if n == 0 {
		return (*scratch)[:0]
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

// FailureInPlace returns the failure record at the start of b as a
// policy.Failure aliasing b when the layout allows it (v1 layout on a
// little-endian machine, 8-aligned), and nil otherwise; ReadFailure
// decodes it field by field. b must hold at least FailureSize bytes.
func FailureInPlace(b []byte) *policy.Failure {
	if !failureLayoutNative || !littleEndian || !aligned(b) {
		return nil
	}
	_ = b[FailureSize-1]
	return (*policy.Failure)(unsafe.Pointer(&b[0]))
}

// Uint32s returns b's first n little-endian uint32s as a slice aliasing b,
// or nil when b is misaligned or the machine is big-endian.
func Uint32s(b []byte, n int) []uint32 {
	if n == 0 || !littleEndian || uintptr(unsafe.Pointer(&b[0]))%4 != 0 {
		return nil
	}
	_ = b[4*n-1]
	return (*[maxView / 4]uint32)(unsafe.Pointer(&b[0]))[:n:n]
}

// Int64s returns b's first n little-endian int64s as a slice aliasing b, or
// nil when b is misaligned or the machine is big-endian.
func Int64s(b []byte, n int) []int64 {
	if n == 0 || !littleEndian || !aligned(b) {
		return nil
	}
	_ = b[8*n-1]
	return (*[maxView / 8]int64)(unsafe.Pointer(&b[0]))[:n:n]
}

// bytesString returns b's bytes as a string without copying them: b must
// not change while the string is in use (an arena, during one call). b is
// not empty.
func bytesString(b []byte) string { return unsafe.String(&b[0], len(b)) }
