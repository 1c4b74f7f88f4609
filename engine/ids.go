package engine

import (
	"crypto/rand"
	"encoding/binary"
	mrand "math/rand/v2"
	"strings"
	"sync"
	"time"
)

// Task and batch ids are ULIDs: 48 bits of millisecond time and 80 bits of
// randomness, in Crockford base32 (26 characters). Within one millisecond the
// random part increases by one per id, so ids sort in creation order. The
// randomness comes from a seeded generator: the same seed and clock give the
// same ids, which keeps simulations and tests reproducible.

const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

type idGen struct {
	rnd    *mrand.ChaCha8
	lastMs uint64
	hi     uint16 // top 16 bits of the random part
	lo     uint64 // low 64 bits of the random part
	// text is the block the next ids are written into, idBlock at a
	// time: an id is a string of its own no more, and a task's id was one
	// of the allocations a queued task kept (ADR 0005, finding 25). An id
	// keeps its block alive (at most idBlock ids, 832 bytes) until the last
	// id of the block is dropped; a block's bytes are never written twice.
	// A generator is not copied once used (strings.Builder would panic).
	text strings.Builder
}

// idBlock is how many ids one allocation holds.
const idBlock = 32

// ulidLen is the length of an id.
const ulidLen = 26

func newIDGen(seed uint64) idGen {
	var s [32]byte
	if seed == 0 {
		_, _ = rand.Read(s[:])
	} else {
		binary.LittleEndian.PutUint64(s[:], seed)
	}
	return idGen{rnd: mrand.NewChaCha8(s)}
}

// IDGenerator makes task and batch ids outside an engine, for a node that
// accepts submissions on the leader's behalf (Ingest keeps them). It is safe
// for concurrent use.
type IDGenerator struct {
	mu sync.Mutex
	g  idGen
}

// NewIDGenerator returns a generator; seed 0 seeds it from crypto/rand.
func NewIDGenerator(seed uint64) *IDGenerator { return &IDGenerator{g: newIDGen(seed)} }

// Next returns a new id for the time now.
func (g *IDGenerator) Next(now time.Time) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.g.next(now)
}

func (g *idGen) next(now time.Time) string {
	out := encodeULIDTo(g.nextBits(now))
	if g.text.Cap()-g.text.Len() < ulidLen {
		g.text = strings.Builder{}
		g.text.Grow(idBlock * ulidLen)
	}
	g.text.Write(out[:])
	all := g.text.String() // the bytes written so far: strings.Builder never changes them
	return all[len(all)-ulidLen:]
}

// nextBits returns the 128 bits of the next id for the time now.
func (g *idGen) nextBits(now time.Time) [16]byte {
	ms := uint64(now.UnixMilli())
	if ms > g.lastMs {
		g.lastMs = ms
		g.hi = uint16(g.rnd.Uint64())
		g.lo = g.rnd.Uint64() >> 1 // leave room to count up within the millisecond
	} else {
		g.lo++
		if g.lo == 0 {
			g.hi++
		}
	}
	var b [16]byte
	b[0], b[1], b[2], b[3], b[4], b[5] = byte(g.lastMs>>40), byte(g.lastMs>>32), byte(g.lastMs>>24), byte(g.lastMs>>16), byte(g.lastMs>>8), byte(g.lastMs)
	binary.BigEndian.PutUint16(b[6:], g.hi)
	binary.BigEndian.PutUint64(b[8:], g.lo)
	return b
}

// encodeULIDTo writes 128 bits as 26 base32 digits (the first digit carries
// the top 3 bits).
func encodeULIDTo(b [16]byte) (out [ulidLen]byte) {
	hi := binary.BigEndian.Uint64(b[:8])
	lo := binary.BigEndian.Uint64(b[8:])
	for i := 25; i >= 0; i-- {
		out[i] = crockford[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return out
}
