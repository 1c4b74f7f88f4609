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

// byteaArray writes a bytea[], nil as NULL.
func (c *copyBuf) byteaArray(v [][]byte) {
	if v == nil {
		c.null()
		return
	}
	at := c.arrayHeader(oidBytea, len(v))
	for _, x := range v {
		c.bytea(x)
	}
	c.arrayEnd(at)
}

func (c *copyBuf) end() { c.b = binary.BigEndian.AppendUint16(c.b, 0xFFFF) }

// copyIn sends the buffer as the rows of a COPY statement.
func (c *copyBuf) copyIn(ctx context.Context, conn *pgconn.PgConn, sql string) error {
	_, err := conn.CopyFrom(ctx, bytes.NewReader(c.b), sql)
	return err
}
