// Package poison makes a read of pooled memory after it was given back
// fail loudly in tests, where in production it would read whatever the
// next request wrote there.
//
// The request path keeps some of a request's memory for the next one: the
// room a submitTasks batch is decoded into (graph/model,
// SubmitTasksJSON.Release) and the resolver's engine items and actions
// (graph/resolvers). Whatever reads that memory after it went back would,
// in production, silently read another request's items. In a test binary
// (testing.Testing) the pools instead overwrite what is given back with
// Fill's pattern and keep it out of the pool, so that such a read sees
// Text, Int, Time or NaN — never another request's values, never a zero
// that looks like an omitted field — and the tests that compare what they
// sent with what the server answered, stored, logged and forwarded fail.
// Production pays one atomic load (a plain load on amd64) and a branch per
// release.
package poison

import (
	"math"
	"reflect"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// Text is what every string of poisoned memory holds.
const Text = "POISONED:read-after-release"

// Int is what every signed integer of poisoned memory holds (shifted right
// a byte at a time for integers too small for it).
const Int = -0x5a5a5a5a5a

// Time is what every time.Time of poisoned memory holds.
var Time = time.Date(1111, 11, 11, 11, 11, 11, 0, time.UTC)

var on atomic.Bool

func init() { on.Store(testing.Testing()) }

// On reports whether memory given back to a pool is poisoned and kept out
// of it: true in test binaries, false otherwise.
func On() bool { return on.Load() }

// Set turns poisoning on or off and returns what restores the previous
// setting. Tests of a pool's reuse itself (that room comes back zero, that
// it is reused without allocating) turn it off; they must not run in
// parallel with tests that rely on it.
func Set(v bool) (restore func()) {
	old := on.Swap(v)
	return func() { on.Store(old) }
}

// maxDepth bounds how deep Fill builds fresh values behind pointers,
// slices and maps (recursive types end in nil there).
const maxDepth = 4

// Fill overwrites the value p points to with the poison pattern: strings
// Text, integers Int (or a shorter pattern), floats NaN, booleans true,
// times Time, and unexported fields as well as exported ones. A pointer,
// slice or map is replaced by a fresh one whose element is poisoned ([]byte
// by Text's bytes): what it pointed to is left as it was, since that may
// be memory the request handed on (strings and lists the engine keeps).
// Fill is for poisoning memory given back, in tests; it is slow.
func Fill(p any) {
	v := reflect.ValueOf(p)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		panic("poison: Fill needs a non-nil pointer")
	}
	fill(v.Elem(), 0)
}

var (
	timeType   = reflect.TypeFor[time.Time]()
	stringType = reflect.TypeFor[string]()
	bytesType  = reflect.TypeFor[[]byte]()
)

func fill(v reflect.Value, depth int) {
	if !v.CanSet() {
		v = reflect.NewAt(v.Type(), unsafe.Pointer(v.UnsafeAddr())).Elem()
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(Text)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n := int64(Int)
		for v.OverflowInt(n) {
			n >>= 8
		}
		v.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		n := uint64(0xa5a5a5a5a5a5a5a5)
		for v.OverflowUint(n) {
			n >>= 8
		}
		v.SetUint(n)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(math.NaN())
	case reflect.Complex64, reflect.Complex128:
		v.SetComplex(complex(math.NaN(), math.NaN()))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Array:
		for i := range v.Len() {
			fill(v.Index(i), depth)
		}
	case reflect.Struct:
		if v.Type() == timeType {
			v.Set(reflect.ValueOf(Time))
			return
		}
		for i := range v.NumField() {
			fill(v.Field(i), depth)
		}
	case reflect.Pointer:
		if depth >= maxDepth {
			v.SetZero()
			return
		}
		p := reflect.New(v.Type().Elem())
		fill(p.Elem(), depth+1)
		v.Set(p)
	case reflect.Slice:
		if depth >= maxDepth {
			v.SetZero()
			return
		}
		if v.Type().ConvertibleTo(bytesType) && v.Type().Elem().Kind() == reflect.Uint8 {
			v.Set(reflect.ValueOf([]byte(Text)).Convert(v.Type()))
			return
		}
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(s.Index(0), depth+1)
		v.Set(s)
	case reflect.Map:
		if depth >= maxDepth {
			v.SetZero()
			return
		}
		m := reflect.MakeMapWithSize(v.Type(), 1)
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k, depth+1)
		fill(e, depth+1)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Interface:
		if stringType.AssignableTo(v.Type()) {
			v.Set(reflect.ValueOf(Text))
			return
		}
		v.SetZero()
	default: // func, chan, unsafe.Pointer
		v.SetZero()
	}
}
