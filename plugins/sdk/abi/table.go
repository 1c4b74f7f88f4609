// The names and details table (ABI v2): one entry per record, then the
// strings the entries point at.

package abi

import "github.com/switchyard/switchyard/plugins/sdk/policy"

// EntrySize returns the size of a names table entry for a module with the
// given policy flags: DetailEntrySize with FlagDetails, NameEntrySize with
// FlagNames, 0 (no table) otherwise.
func EntrySize(flags int32) uint32 {
	switch {
	case flags&FlagDetails != 0:
		return DetailEntrySize
	case flags&FlagNames != 0:
		return NameEntrySize
	}
	return 0
}

// TableOffset is where the table goes after a call's input and output that
// end at end: the next multiple of 8.
func TableOffset(end uint32) uint32 { return (end + 7) &^ 7 }

// TableBytes returns the bytes a table over n records takes with entries of
// entry bytes: the entries and every string they point at. d must be
// non-nil when entry is DetailEntrySize.
func TableBytes(n, entry uint32, names policy.Names, d policy.Details) uint32 {
	total := n * entry
	for i := range int(n) {
		total += uint32(len(names.AgentID(i)) + len(names.LaneName(i)))
		if entry >= DetailEntrySize {
			a := d.Agent(i)
			total += uint32(len(d.Session(i)) + len(d.Labels(i)) + len(a.Labels) + len(d.ErrorCode(i)))
		}
	}
	return total
}

// PutTable writes the table over n records at off in b (the arena), its
// strings after its entries. d must be non-nil when entry is
// DetailEntrySize.
func PutTable(b []byte, off, n, entry uint32, names policy.Names, d policy.Details) {
	at := off + n*entry
	str := func(e []byte, s string) {
		le.PutUint32(e[0:], at)
		le.PutUint32(e[4:], uint32(len(s)))
		at += uint32(copy(b[at:], s))
	}
	for i := range int(n) {
		e := b[off+uint32(i)*entry:]
		agent, lane := names.AgentID(i), names.LaneName(i)
		le.PutUint64(e[0:], policy.Key(agent))
		le.PutUint64(e[8:], policy.Key(lane))
		str(e[16:], agent)
		str(e[24:], lane)
		if entry < DetailEntrySize {
			continue
		}
		session := d.Session(i)
		var sk uint64
		if session != "" {
			sk = policy.Key(session)
		}
		le.PutUint64(e[32:], sk)
		str(e[40:], session)
		str(e[48:], string(d.Labels(i)))
		a := d.Agent(i)
		str(e[56:], string(a.Labels))
		le.PutUint32(e[64:], a.Weight)
		le.PutUint32(e[68:], a.MaxInFlight)
		str(e[72:], d.ErrorCode(i))
	}
}

// Table reads a names or details table in an arena: what a guest's
// policies see as policy.Names and policy.Details. Its strings alias the
// arena, so they are valid until the arena is written again.
type Table struct {
	Arena []byte
	Off   uint32 // where the entries start
	N     int    // entries
	Entry uint32 // NameEntrySize or DetailEntrySize
}

// str returns the string an entry's (offset, length) pair at field points
// at, "" when it is out of range.
func (t Table) str(i int, field uint32) string {
	if i < 0 || i >= t.N || field+8 > t.Entry {
		return ""
	}
	e := uint64(t.Off) + uint64(i)*uint64(t.Entry) + uint64(field)
	if e+8 > uint64(len(t.Arena)) {
		return ""
	}
	p, l := uint64(le.Uint32(t.Arena[e:])), uint64(le.Uint32(t.Arena[e+4:]))
	if l == 0 || p+l > uint64(len(t.Arena)) {
		return ""
	}
	return bytesString(t.Arena[p : p+l])
}

// u32 returns an entry's u32 field, 0 when it is out of range.
func (t Table) u32(i int, field uint32) uint32 {
	if i < 0 || i >= t.N || field+4 > t.Entry {
		return 0
	}
	e := uint64(t.Off) + uint64(i)*uint64(t.Entry) + uint64(field)
	if e+4 > uint64(len(t.Arena)) {
		return 0
	}
	return le.Uint32(t.Arena[e:])
}

// Fits reports whether the table's entries lie inside its arena.
func (t Table) Fits() bool {
	return t.N >= 0 && uint64(t.Off)+uint64(t.N)*uint64(t.Entry) <= uint64(len(t.Arena))
}

// AgentID implements policy.Names.
func (t Table) AgentID(i int) string { return t.str(i, 16) }

// LaneName implements policy.Names.
func (t Table) LaneName(i int) string { return t.str(i, 24) }

// Session implements policy.Details.
func (t Table) Session(i int) string { return t.str(i, 40) }

// Labels implements policy.Details.
func (t Table) Labels(i int) policy.Labels { return policy.Labels(t.str(i, 48)) }

// Agent implements policy.Details.
func (t Table) Agent(i int) policy.AgentInfo {
	return policy.AgentInfo{Weight: t.u32(i, 64), MaxInFlight: t.u32(i, 68), Labels: policy.Labels(t.str(i, 56))}
}

// ErrorCode implements policy.Details.
func (t Table) ErrorCode(i int) string { return t.str(i, 72) }

var _ policy.Details = Table{}
