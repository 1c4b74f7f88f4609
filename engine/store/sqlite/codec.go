package sqlite

// How engine records become column values and back. Specs, statuses and
// lane configurations have the stored form the SQL stores share
// (engine/store/internal/sqlcodec): JSON, readable with the sqlite3 shell
// and json_extract. Events are packed in chunks with a compact binary
// encoding (see encodeEvents).

import (
	"encoding/binary"
	"errors"
	"time"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/store/internal/sqlcodec"
)

func unixNano(t time.Time) int64 { return sqlcodec.UnixNano(t) }

func fromUnixNano(n int64) time.Time { return sqlcodec.FromUnixNano(n) }

var (
	decodeSpec   = sqlcodec.DecodeSpec
	decodeStatus = sqlcodec.DecodeStatus
	appendStatus = sqlcodec.AppendStatus
	encodeLane   = sqlcodec.EncodeLane
	decodeLane   = sqlcodec.DecodeLane
)

// Event chunks. A chunk is a version byte followed by its events, each as:
// uvarint seq delta (from the previous event, or from 0), zigzag varint at
// delta (unix ns, 0 for the zero time), type, from, to (one byte each),
// varint attempt, and six length-prefixed strings: task, agent, lane,
// session, batch, reason.

// Version 2 adds a flags byte after the state bytes (bit 0: the event's
// Webhook); version 1 chunks read as flags 0.
const chunkVersion = 2

var errBadChunk = errors.New("corrupt event chunk")

func encodeEvents(dst []byte, evs []engine.Event) []byte {
	dst = append(dst, chunkVersion)
	var prevSeq uint64
	var prevAt int64
	for i := range evs {
		e := &evs[i]
		at := unixNano(e.At)
		dst = binary.AppendUvarint(dst, e.Seq-prevSeq)
		dst = binary.AppendVarint(dst, at-prevAt)
		prevSeq, prevAt = e.Seq, at
		var flags byte
		if e.Webhook {
			flags |= 1
		}
		dst = append(dst, byte(e.Type), byte(e.From), byte(e.To), flags)
		dst = binary.AppendVarint(dst, int64(e.Attempt))
		for _, s := range [...]string{e.TaskID, e.AgentID, e.Lane, e.SessionKey, e.BatchID, e.Reason} {
			dst = binary.AppendUvarint(dst, uint64(len(s)))
			dst = append(dst, s...)
		}
	}
	return dst
}

// decodeEvents appends the events of a chunk to dst, calling keep (when not
// nil) to decide which ones.
func decodeEvents(dst []engine.Event, data []byte, keep func(seq uint64) bool) ([]engine.Event, error) {
	if len(data) == 0 || data[0] < 1 || data[0] > chunkVersion {
		return dst, errBadChunk
	}
	version := data[0]
	p := data[1:]
	var seq uint64
	var at int64
	uv := func() (uint64, bool) {
		v, n := binary.Uvarint(p)
		if n <= 0 {
			return 0, false
		}
		p = p[n:]
		return v, true
	}
	sv := func() (int64, bool) {
		v, n := binary.Varint(p)
		if n <= 0 {
			return 0, false
		}
		p = p[n:]
		return v, true
	}
	str := func() (string, bool) {
		n, ok := uv()
		if !ok || n > uint64(len(p)) {
			return "", false
		}
		s := string(p[:n])
		p = p[n:]
		return s, true
	}
	for len(p) > 0 {
		d, ok1 := uv()
		da, ok2 := sv()
		if !ok1 || !ok2 || len(p) < 3 {
			return dst, errBadChunk
		}
		seq += d
		at += da
		e := engine.Event{Seq: seq, At: fromUnixNano(at), Type: engine.EventType(p[0]), From: engine.State(p[1]), To: engine.State(p[2])}
		p = p[3:]
		if version >= 2 {
			if len(p) < 1 {
				return dst, errBadChunk
			}
			e.Webhook = p[0]&1 != 0
			p = p[1:]
		}
		att, ok := sv()
		if !ok {
			return dst, errBadChunk
		}
		e.Attempt = int(att)
		for _, f := range [...]*string{&e.TaskID, &e.AgentID, &e.Lane, &e.SessionKey, &e.BatchID, &e.Reason} {
			if *f, ok = str(); !ok {
				return dst, errBadChunk
			}
		}
		if keep == nil || keep(seq) {
			dst = append(dst, e)
		}
	}
	return dst, nil
}

// appendSeqs appends seqs to a task's event list (uvarints).
func appendSeqs(dst []byte, seqs ...uint64) []byte {
	for _, s := range seqs {
		dst = binary.AppendUvarint(dst, s)
	}
	return dst
}

func decodeSeqs(dst []uint64, data []byte) []uint64 {
	for len(data) > 0 {
		v, n := binary.Uvarint(data)
		if n <= 0 {
			return dst
		}
		dst = append(dst, v)
		data = data[n:]
	}
	return dst
}

// Lanes are stored as the JSON of engine.LaneConfig (durations in ns).
