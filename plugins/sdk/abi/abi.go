// Package abi is the single source of truth for Switchyard's WebAssembly
// policy ABI: export and import names, the arena header, and the byte layout
// of every record that crosses between host and guest. The host encodes with
// it and the Go guest SDK decodes with it, so the two cannot drift; ABI.md in
// the parent directory describes the same layout for authors in other
// languages.
//
// The package has no dependencies beyond the policy records and compiles for
// GOOS=wasip1.
package abi

import (
	"encoding/binary"
	"unsafe"

	"github.com/switchyard/switchyard/plugins/sdk/policy"
)

// Version is the ABI version this package implements, returned by a guest's
// abi_version export. The host takes modules of every version from
// MinVersion to Version and refuses others; a module of an older version
// decides exactly as it did under that version.
const Version = 2

// MinVersion is the oldest ABI version the host still takes.
const MinVersion = 1

// LayoutVersion is the version of the record layouts written in the header.
// Appending fields to a record raises the record size, not this number; it
// changes only if an existing field moves or changes meaning.
const LayoutVersion = 1

// Names of the guest's exports.
const (
	ExportABIVersion  = "abi_version"    // () -> i32
	ExportPolicyFlags = "policy_flags"   // () -> i32, optional
	ExportArena       = "arena"          // (min_len i32) -> i64 (ptr<<32 | len)
	ExportConfigure   = "configure"      // (len i32) -> i32, optional
	ExportSelection   = "selection_rank" // (now_ms i64) -> i32
	ExportFairness    = "fairness_pick"  // (now_ms i64, aging_ms i64, slots i32, flags i32) -> i32
	ExportRetry       = "retry_decide"   // () -> i64
	ExportInitialize  = "_initialize"    // () -> (), optional: run once at instantiation
	ExportMemory      = "memory"         // the guest's linear memory
)

// Names of the host's imports offered to guests, in module ImportModule.
const (
	ImportModule = "switchyard"
	ImportLog    = "log"    // (level i32, ptr i32, len i32) -> ()
	ImportReason = "reason" // (ptr i32, len i32) -> ()
)

// Log levels passed to the log import.
const (
	LogDebug = 0
	LogInfo  = 1
	LogWarn  = 2
	LogError = 3
)

// Policy flags returned by the optional policy_flags export.
const (
	// FlagStateless declares that the policy keeps no state between
	// decisions that changes its answers, so the host may spread concurrent
	// decisions over several instances, and the engine may skip a fairness
	// decision that has a single candidate. Without it every decision goes
	// to one instance at a time.
	FlagStateless = 1 << 0
	// FlagNames (ABI v2) asks the host for the names behind a fairness
	// decision's candidates: a names table, located by the header's
	// NamesOffset. Without it no table is written, at no cost.
	FlagNames = 1 << 1
	// FlagHolds (ABI v2) declares that the fairness policy may answer hold,
	// so the engine asks it even about a single candidate (which a
	// stateless policy otherwise is not asked about).
	FlagHolds = 1 << 2
	// FlagDetails (ABI v2, every slot) asks the host for the details table:
	// the names table with entries of DetailEntrySize bytes, which add the
	// task's session and labels, the agent's weight, ceiling and labels,
	// and a retry's error code. It implies FlagNames.
	FlagDetails = 1 << 3
)

// Hold answers (ABI v2): a fairness_pick return value from HoldBase down to
// HoldBase-MaxHoldHintMs means "dispatch nothing from these candidates now,
// ask again in HoldBase-value ms (0: no hint)". Any other negative value is
// still an error.
const (
	HoldBase      = -(1 << 30)
	MaxHoldHintMs = 1<<30 - 1
)

// NameEntrySize is the size of one entry of the names table: per candidate,
// u64 agent_key, u64 lane_key (policy.Key of the agent's id and the lane's
// name), u32 agent_id_off, u32 agent_id_len, u32 lane_name_off,
// u32 lane_name_len (offsets from the start of the arena, UTF-8 bytes).
const NameEntrySize = 32

// DetailEntrySize is the size of one entry of the table when the module
// sets FlagDetails: the NameEntrySize bytes of a names entry, then
// u64 session_key (policy.Key of the session, 0 when none),
// u32 session_off, u32 session_len, u32 labels_off, u32 labels_len (the
// task's labels, in the labels wire format of policy.Labels),
// u32 agent_labels_off, u32 agent_labels_len, u32 agent_weight,
// u32 agent_max_inflight, u32 error_code_off, u32 error_code_len.
const DetailEntrySize = 80

// Custom section and export by which a module declares the JSON Schema its
// configuration must satisfy (plugins/ABI.md, "Configuration schema").
const (
	// ExportConfigSchema is () -> i64: ptr<<32 | len of the schema's JSON
	// text in the guest's memory, 0 for none. Optional.
	ExportConfigSchema = "config_schema"
	// MaxSchemaBytes bounds a declared schema.
	MaxSchemaBytes = 64 << 10
)

// ErrGuest is the return value (any negative value works) by which a guest
// refuses a call; it should call the reason import first.
const ErrGuest = -1

// HeaderSize is the size of the header in front of the records.
const HeaderSize = 16

// Header sits at arena offset 0 in front of the input records.
type Header struct {
	Layout     uint32 // LayoutVersion
	RecordSize uint32 // bytes per record, at least the v1 size of the record
	Count      uint32 // number of records
	// NamesOffset (ABI v2, fairness) is where the names table starts, from
	// the start of the arena; 0 when there is none (a v1 module reads it as
	// reserved).
	NamesOffset uint32
}

// PutHeader writes h at the start of b.
func PutHeader(b []byte, h Header) {
	binary.LittleEndian.PutUint32(b[0:], h.Layout)
	binary.LittleEndian.PutUint32(b[4:], h.RecordSize)
	binary.LittleEndian.PutUint32(b[8:], h.Count)
	binary.LittleEndian.PutUint32(b[12:], h.NamesOffset)
}

// ReadHeader reads the header at the start of b.
func ReadHeader(b []byte) Header {
	if headerLayoutNative && littleEndian && uintptr(unsafe.Pointer(&b[0]))%4 == 0 {
		_ = b[HeaderSize-1]
		return *(*Header)(unsafe.Pointer(&b[0])) // one copy, and inlined: see native.go
	}
	return readHeader(b)
}

// headerLayoutNative is true when Header's memory layout is the header's.
const headerLayoutNative = unsafe.Sizeof(Header{}) == HeaderSize &&
	unsafe.Offsetof(Header{}.RecordSize) == 4 && unsafe.Offsetof(Header{}.Count) == 8 &&
	unsafe.Offsetof(Header{}.NamesOffset) == 12

func readHeader(b []byte) Header {
	return Header{
		Layout:      binary.LittleEndian.Uint32(b[0:]),
		RecordSize:  binary.LittleEndian.Uint32(b[4:]),
		Count:       binary.LittleEndian.Uint32(b[8:]),
		NamesOffset: binary.LittleEndian.Uint32(b[12:]),
	}
}

// Record sizes of layout version 1.
const (
	TaskSize      = 48
	CandidateSize = 72
	FailureSize   = 88
)

// OutputOffset is where a guest writes its results (ranks or picks): after
// the header and count records of recordSize bytes, aligned to 8.
func OutputOffset(count, recordSize uint32) uint32 {
	return (HeaderSize + count*recordSize + 7) &^ 7
}

// SelectionBytes is the arena size a selection call over n tasks needs.
func SelectionBytes(n uint32) uint32 { return OutputOffset(n, TaskSize) + 8*n }

// FairnessBytes is the arena size a fairness call over n candidates with the
// given number of slots needs.
func FairnessBytes(n, slots uint32) uint32 { return OutputOffset(n, CandidateSize) + 4*slots }

// RetryBytes is the arena size a retry call needs.
const RetryBytes = HeaderSize + FailureSize

// PackArena packs the arena export's answer.
func PackArena(ptr, n uint32) int64 { return int64(uint64(ptr)<<32 | uint64(n)) }

// UnpackArena unpacks the arena export's answer.
func UnpackArena(v int64) (ptr, n uint32) { return uint32(uint64(v) >> 32), uint32(v) }

// PackDecision packs a retry decision: the delay in the high 56 bits and the
// action in the low 8 bits. A negative delay cannot be packed faithfully; it
// decodes as an invalid decision, which is what it is.
func PackDecision(d policy.Decision) int64 { return d.DelayMs<<8 | int64(d.Action) }

// UnpackDecision unpacks a retry decision. ok is false when v is negative:
// the guest refused the call.
func UnpackDecision(v int64) (d policy.Decision, ok bool) {
	if v < 0 {
		return policy.Decision{}, false
	}
	return policy.Decision{Action: policy.Action(v & 0xff), DelayMs: v >> 8}, true
}

// NamesBytes returns the arena bytes a fairness decision over n candidates
// with the given slots needs when the names table is written, and where the
// table starts: after the output, 8-aligned, followed by the names.
func NamesBytes(n, slots uint32, names int) (need, offset uint32) {
	offset = (FairnessBytes(n, slots) + 7) &^ 7
	return offset + n*NameEntrySize + uint32(names), offset
}
