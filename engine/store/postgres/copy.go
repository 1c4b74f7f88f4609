package postgres

// COPY … FROM STDIN (FORMAT binary), encoded by hand. pgx's CopyFrom boxes
// every value in an interface and looks up its encoder per value: a sixth
// of the process in a profile of batch submissions, and much of its garbage.
// The rows here have fixed column types, so they are written straight into
// one buffer in PostgreSQL's binary COPY format: a header, per row a field
// count and length-prefixed fields (-1 for NULL), and a trailer.

import (
	"bytes"
	"context"
	"encoding/binary"
	"sync"

	"github.com/jackc/pgx/v5/pgconn"
)

// Type OIDs of array elements.
const (
	oidBytea = 17
	oidInt8  = 20
)

type copyBuf struct{ b []byte }

func (c *copyBuf) start() {
	c.b = append(c.b[:0], "PGCOPY\n\xff\r\n\x00"...)
	c.b = binary.BigEndian.AppendUint32(c.b, 0) // flags
	c.b = binary.BigEndian.AppendUint32(c.b, 0) // header extension length
}

func (c *copyBuf) row(fields int) { c.b = binary.BigEndian.AppendUint16(c.b, uint16(fields)) }

func (c *copyBuf) null() { c.b = binary.BigEndian.AppendUint32(c.b, 0xFFFFFFFF) }

func (c *copyBuf) int8(v int64) {
	c.b = binary.BigEndian.AppendUint32(c.b, 8)
	c.b = binary.BigEndian.AppendUint64(c.b, uint64(v))
}

// int8OrNull writes 0 as NULL.
func (c *copyBuf) int8OrNull(v int64) {
	if v == 0 {
		c.null()
		return
	}
	c.int8(v)
}

func (c *copyBuf) int4(v int32) {
	c.b = binary.BigEndian.AppendUint32(c.b, 4)
	c.b = binary.BigEndian.AppendUint32(c.b, uint32(v))
}

func (c *copyBuf) int2(v int16) {
	c.b = binary.BigEndian.AppendUint32(c.b, 2)
	c.b = binary.BigEndian.AppendUint16(c.b, uint16(v))
}

func (c *copyBuf) bool(v bool) {
	c.b = binary.BigEndian.AppendUint32(c.b, 1)
	if v {
		c.b = append(c.b, 1)
	} else {
		c.b = append(c.b, 0)
	}
}

// text writes a string as a bytea value (never NULL).
func (c *copyBuf) text(v string) {
	c.b = binary.BigEndian.AppendUint32(c.b, uint32(len(v)))
	c.b = append(c.b, v...)
}

// textOrNull writes "" as NULL, as bytea(bytesOrNil(v)) does.
func (c *copyBuf) textOrNull(v string) {
	if v == "" {
		c.null()
		return
	}
	c.text(v)
}

// open starts a value whose length is known only once it is written; it
// returns where the length goes (patched by arrayEnd, which does the same).
func (c *copyBuf) open() int {
	at := len(c.b)
	c.b = binary.BigEndian.AppendUint32(c.b, 0)
	return at
}

// labels writes labelElems(labels) as a bytea[] (NULL for none) without
// building the elements apart.
func (c *copyBuf) labels(labels map[string]string) {
	if len(labels) == 0 {
		c.null()
		return
	}
	at := c.arrayHeader(oidBytea, len(labels))
	for k, v := range labels {
		e := c.open()
		c.b = binary.AppendUvarint(c.b, uint64(len(k)))
		c.b = append(c.b, k...)
		c.b = append(c.b, v...)
		c.arrayEnd(e)
	}
	c.arrayEnd(at)
}

// bytea writes nil as NULL.
func (c *copyBuf) bytea(v []byte) {
	if v == nil {
		c.null()
		return
	}
	c.b = binary.BigEndian.AppendUint32(c.b, uint32(len(v)))
	c.b = append(c.b, v...)
}

// arrayHeader writes a one-dimensional array's length prefix (patched by
// arrayEnd) and header; it returns where the length goes.
func (c *copyBuf) arrayHeader(oid uint32, n int) int {
	at := len(c.b)
	c.b = binary.BigEndian.AppendUint32(c.b, 0)
	if n == 0 {
		c.b = binary.BigEndian.AppendUint32(c.b, 0) // no dimensions: the empty array
		c.b = binary.BigEndian.AppendUint32(c.b, 0)
		c.b = binary.BigEndian.AppendUint32(c.b, oid)
		return at
	}
	c.b = binary.BigEndian.AppendUint32(c.b, 1) // dimensions
	c.b = binary.BigEndian.AppendUint32(c.b, 0) // no NULL elements
	c.b = binary.BigEndian.AppendUint32(c.b, oid)
	c.b = binary.BigEndian.AppendUint32(c.b, uint32(n)) // length
	c.b = binary.BigEndian.AppendUint32(c.b, 1)         // lower bound
	return at
}

func (c *copyBuf) arrayEnd(at int) {
	binary.BigEndian.PutUint32(c.b[at:], uint32(len(c.b)-at-4))
}

// int8Array writes a bigint[] (empty, not NULL, for no elements).
func (c *copyBuf) int8Array(v []uint64) {
	at := c.arrayHeader(oidInt8, len(v))
	for _, x := range v {
		c.int8(int64(x))
	}
	c.arrayEnd(at)
}

func (c *copyBuf) end() { c.b = binary.BigEndian.AppendUint16(c.b, 0xFFFF) }

// copyRowsBuf holds a commit's COPY payloads, written as its rows are
// built (rowsLocked): no column arrays in between. The buffers are reused
// from one commit to the next (copyPool): a commit of a few hundred tasks
// wrote about 3 KB of them per task, which the collector then paced itself
// by (ADR 0005, finding 22).
type copyRowsBuf struct {
	tasks, status, events copyBuf
	newTasks, newEvents   int
}

var copyPool = sync.Pool{New: func() any { return new(copyRowsBuf) }}

// maxPooledCopy: larger buffers (a commit of tens of thousands of tasks, as
// at recovery) are left to the collector rather than kept.
const maxPooledCopy = 4 << 20

func getCopyRows() *copyRowsBuf {
	c := copyPool.Get().(*copyRowsBuf)
	c.newTasks, c.newEvents = 0, 0
	c.tasks.start()
	c.status.start()
	c.events.start()
	return c
}

// release returns the buffers for the next commit. Only after a COPY that
// succeeded: pgconn's CopyFrom can return on a server error while its
// reading goroutine is still at the buffer.
func (c *copyRowsBuf) release() {
	if cap(c.tasks.b)+cap(c.status.b)+cap(c.events.b) > maxPooledCopy {
		return
	}
	copyPool.Put(c)
}

// copyIn sends the buffer as the rows of a COPY statement.
func (c *copyBuf) copyIn(ctx context.Context, conn *pgconn.PgConn, sql string) error {
	_, err := conn.CopyFrom(ctx, bytes.NewReader(c.b), sql)
	return err
}
