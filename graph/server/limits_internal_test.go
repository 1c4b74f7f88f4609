package server

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
	"testing/iotest"
)

// chunkReader hands out its data a random few bytes at a time, then fails
// with err (io.EOF for a clean end).
type chunkReader struct {
	data []byte
	rng  *rand.Rand
	err  error
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, c.err
	}
	n := min(len(p), len(c.data), 1+c.rng.IntN(700))
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

// readAllSized reads what io.ReadAll reads, and fails as it fails, whatever
// the length the body declared: exact, short, long or none.
func TestReadAllSizedReadsWhatReadAllReads(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 5))
	boom := errors.New("connection reset")
	for i := range 2000 {
		data := make([]byte, rng.IntN(5000))
		for j := range data {
			data[j] = byte(rng.UintN(256))
		}
		var end error = io.EOF
		if i%7 == 0 {
			end = boom
		}
		sizes := []int64{-1, 0, int64(len(data)), int64(len(data)) + 1 + rng.Int64N(100)}
		if len(data) > 0 {
			sizes = append(sizes, rng.Int64N(int64(len(data))))
		}
		want, wantErr := io.ReadAll(&chunkReader{data: data, rng: rand.New(rand.NewPCG(uint64(i), 1)), err: end})
		for _, size := range sizes {
			got, err := readAllSized(&chunkReader{data: data, rng: rand.New(rand.NewPCG(uint64(i), 2)), err: end}, size)
			if !bytes.Equal(got, want) || err != wantErr {
				t.Fatalf("body %d of %d bytes, declared %d: read %d bytes, %v; io.ReadAll read %d, %v",
					i, len(data), size, len(got), err, len(want), wantErr)
			}
		}
	}
	// A reader that gives its last bytes with io.EOF, and one that answers
	// 0, nil now and then.
	data := bytes.Repeat([]byte("switchyard"), 300)
	for _, r := range []func() io.Reader{
		func() io.Reader { return iotest.DataErrReader(bytes.NewReader(data)) },
		func() io.Reader { return iotest.HalfReader(bytes.NewReader(data)) },
		func() io.Reader { return iotest.OneByteReader(bytes.NewReader(data)) },
	} {
		for _, size := range []int64{-1, 0, 10, int64(len(data)), int64(len(data)) * 2} {
			got, err := readAllSized(r(), size)
			if !bytes.Equal(got, data) || err != nil {
				t.Fatalf("declared %d: read %d bytes, %v; want %d, nil", size, len(got), err, len(data))
			}
		}
	}
}

// A body that declares its length is read into one allocation of its size,
// where io.ReadAll grows a buffer from 512 bytes by copying.
func TestReadAllSizedAllocatesABodyOnce(t *testing.T) {
	data := bytes.Repeat([]byte(`{"agentId":"a","action":{"kind":"noop"}},`), 500) // about 20 KB, a batch's body
	r := bytes.NewReader(data)
	var got []byte
	allocs := testing.AllocsPerRun(50, func() {
		r.Reset(data)
		got, _ = readAllSized(r, int64(len(data)))
	})
	if allocs != 1 || !bytes.Equal(got, data) {
		t.Fatalf("a body of declared length: %v allocations (want 1), read %d of %d bytes", allocs, len(got), len(data))
	}
	grown := testing.AllocsPerRun(50, func() {
		r.Reset(data)
		got, _ = io.ReadAll(r)
	})
	if grown <= 1 {
		t.Fatalf("io.ReadAll made %v allocations for %d bytes: the comparison no longer holds", grown, len(data))
	}
}

// A declared length is a promise, not bytes: a client that declares the
// whole limit and sends ten bytes gets a buffer of at most presizeMax.
func TestReadAllSizedDoesNotTrustALargeDeclaredLength(t *testing.T) {
	got, err := readAllSized(bytes.NewReader([]byte("0123456789")), 64<<20)
	if err != nil || string(got) != "0123456789" {
		t.Fatalf("read %q, %v", got, err)
	}
	if cap(got) > presizeMax+1 {
		t.Fatalf("a buffer of %d bytes for a body that declared 64 MiB and sent 10", cap(got))
	}
}
