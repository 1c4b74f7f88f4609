package postgres

// How engine records become column values and back. Specs, statuses and
// lane configurations are JSON documents in bytea columns, in the stored
// form the SQL stores share (engine/store/internal/sqlcodec). Params and
// results are not part of the JSON: they are stored verbatim, so that a
// store returns exactly the bytes it was given. Labels become one bytea
// element each, so that a GIN index answers "has every one of these labels"
// (@>).

import (
	"encoding/binary"
	"strconv"
	"time"

	"github.com/switchyard/switchyard/engine/store/internal/sqlcodec"
)

func unixNano(t time.Time) int64 { return sqlcodec.UnixNano(t) }

func fromUnixNano(n int64) time.Time { return sqlcodec.FromUnixNano(n) }

var (
	decodeSpec   = sqlcodec.DecodeSpec
	decodeStatus = sqlcodec.DecodeStatus
	encodeLane   = sqlcodec.EncodeLane
	decodeLane   = sqlcodec.DecodeLane
)

// bytesOrNil returns s as bytes, or nil (SQL NULL) when it is empty.
func bytesOrNil(s string) []byte {
	if s == "" {
		return nil
	}
	return []byte(s)
}

// labelElems returns one element per label, uvarint(len(key)) key value, or
// nil (SQL NULL) when there is none: "has these labels" is then the array
// containment @>, which a GIN index answers.
func labelElems(labels map[string]string) [][]byte {
	if len(labels) == 0 {
		return nil
	}
	out := make([][]byte, 0, len(labels))
	for k, v := range labels {
		e := make([]byte, 0, binary.MaxVarintLen64+len(k)+len(v))
		e = binary.AppendUvarint(e, uint64(len(k)))
		e = append(e, k...)
		out = append(out, append(e, v...))
	}
	return out
}

// labelsLiteral returns labelElems as a bytea[] literal ('{"\\x…",…}'), or
// "" for none: arrays of arrays of different lengths cannot be passed as one
// parameter, so each task's labels travel as a literal the SQL casts.
func labelsLiteral(labels map[string]string) string {
	elems := labelElems(labels)
	if elems == nil {
		return ""
	}
	const hexdigits = "0123456789abcdef"
	b := make([]byte, 0, 64*len(elems))
	b = append(b, '{')
	for i, e := range elems {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `"\\x`...)
		for _, c := range e {
			b = append(b, hexdigits[c>>4], hexdigits[c&15])
		}
		b = append(b, '"')
	}
	return string(append(b, '}'))
}

// seqsLiteral returns seqs as a bigint[] literal ("{1,2,3}"), or "" for none.
func seqsLiteral(dst []byte, seqs []uint64) []byte {
	if len(seqs) == 0 {
		return dst
	}
	dst = append(dst, '{')
	for i, s := range seqs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendUint(dst, s, 10)
	}
	return append(dst, '}')
}

// Lanes are stored as the JSON of engine.LaneConfig (durations in ns).
