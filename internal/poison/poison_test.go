package poison_test

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/poison"
)

type inner struct{ S string }

type sample struct {
	S      string
	P      *string
	I      int
	I8     int8
	U16    uint16
	F      float64
	B      bool
	T      time.Time
	Raw    json.RawMessage
	List   []string
	Ptrs   []*inner
	M      map[string]string
	Any    any
	Err    error
	hidden string
	self   *sample
}

// Fill overwrites every field, unexported ones too, and replaces what a
// pointer, slice or map referred to without writing into it: memory the
// poisoned value shared with others stays as it was.
func TestFillPoisonsEveryFieldAndWritesNothingItPointedTo(t *testing.T) {
	require.True(t, poison.On(), "poisoning is on in a test binary")
	shared, list := "kept", []string{"kept"}
	raw := json.RawMessage(`{"a":1}`)
	m := map[string]string{"k": "v"}
	v := sample{S: "s", P: &shared, I: 1, I8: 1, U16: 1, F: 1, T: time.Now(), Raw: raw, List: list,
		Ptrs: []*inner{{S: "kept"}}, M: m, Any: 1, hidden: "h"}
	poison.Fill(&v)
	require.Equal(t, poison.Text, v.S)
	require.Equal(t, poison.Text, *v.P)
	require.Equal(t, poison.Text, v.hidden)
	require.Equal(t, poison.Int, v.I)
	require.NotZero(t, v.I8)
	require.NotZero(t, v.U16)
	require.True(t, math.IsNaN(v.F))
	require.True(t, v.B)
	require.True(t, v.T.Equal(poison.Time))
	require.Equal(t, poison.Text, string(v.Raw))
	require.Equal(t, []string{poison.Text}, v.List)
	require.Equal(t, poison.Text, v.Ptrs[0].S)
	require.Equal(t, map[string]string{poison.Text: poison.Text}, v.M)
	require.Equal(t, poison.Text, v.Any)
	require.Nil(t, v.Err)
	require.NotNil(t, v.self, "a recursive type is filled to a bounded depth")
	require.Equal(t, "kept", shared)
	require.Equal(t, []string{"kept"}, list)
	require.Equal(t, `{"a":1}`, string(raw))
	require.Equal(t, map[string]string{"k": "v"}, m)
}

func TestSetRestores(t *testing.T) {
	restore := poison.Set(false)
	require.False(t, poison.On())
	restore()
	require.True(t, poison.On())
}
