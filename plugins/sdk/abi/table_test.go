package abi

import (
	"testing"

	"github.com/switchyard/switchyard/plugins/sdk/policy"
)

// fakeDetails is one record's details.
type fakeDetails struct {
	agent, lane, session, code string
	labels                     policy.Labels
	info                       policy.AgentInfo
}

func (f fakeDetails) AgentID(int) string         { return f.agent }
func (f fakeDetails) LaneName(int) string        { return f.lane }
func (f fakeDetails) Session(int) string         { return f.session }
func (f fakeDetails) Labels(int) policy.Labels   { return f.labels }
func (f fakeDetails) Agent(int) policy.AgentInfo { return f.info }
func (f fakeDetails) ErrorCode(int) string       { return f.code }

func TestDetailsTableRoundTrip(t *testing.T) {
	d := fakeDetails{agent: "alice", lane: "main", session: "s-1", code: "tab_not_found",
		labels: policy.MakeLabels(map[string]string{"kind": "search"}),
		info:   policy.AgentInfo{Weight: 3, MaxInFlight: 7, Labels: policy.MakeLabels(map[string]string{"tier": "gold"})}}
	for _, entry := range []uint32{NameEntrySize, DetailEntrySize} {
		off := TableOffset(RetryBytes)
		b := make([]byte, off+TableBytes(2, entry, d, d))
		PutTable(b, off, 2, entry, d, d)
		tab := Table{Arena: b, Off: off, N: 2, Entry: entry}
		if !tab.Fits() || tab.AgentID(1) != "alice" || tab.LaneName(1) != "main" {
			t.Fatalf("entry %d: names %q %q", entry, tab.AgentID(1), tab.LaneName(1))
		}
		if got := le.Uint64(b[off:]); got != policy.Key("alice") {
			t.Fatalf("agent_key %x, want %x", got, policy.Key("alice"))
		}
		if entry == NameEntrySize {
			if tab.Session(0) != "" || tab.Agent(0).Weight != 0 {
				t.Fatal("a names table reads as details")
			}
			continue
		}
		if v, _ := tab.Labels(0).Get("kind"); v != "search" || tab.Session(0) != "s-1" || tab.ErrorCode(1) != "tab_not_found" {
			t.Fatalf("details: %q %q %q", v, tab.Session(0), tab.ErrorCode(1))
		}
		a := tab.Agent(1)
		if v, _ := a.Labels.Get("tier"); a.Weight != 3 || a.MaxInFlight != 7 || v != "gold" {
			t.Fatalf("agent %+v", a)
		}
		if got := le.Uint64(b[off+32:]); got != policy.Key("s-1") {
			t.Fatalf("session_key %x", got)
		}
	}
	if (Table{Arena: make([]byte, 10), Off: 8, N: 1, Entry: NameEntrySize}).Fits() {
		t.Fatal("a table past the arena fits")
	}
}
