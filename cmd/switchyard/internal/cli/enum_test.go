package cli

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/graph/generated"
)

// The TaskEventKind values watch --kind takes by hand are the schema's.
func TestEventKindsAreTheSchemas(t *testing.T) {
	t.Parallel()
	def := generated.NewExecutableSchema(generated.Config{}).Schema().Types["TaskEventKind"]
	require.NotNil(t, def)
	var want []string
	for _, v := range def.EnumValues {
		want = append(want, v.Name)
	}
	require.Equal(t, want, eventKinds)
}

// An enum value the schema does not have is a usage error that names the
// values there are, spelt as the flags spell them.
func TestEnumValuesRefuseUnknownValuesAsUsageErrors(t *testing.T) {
	t.Parallel()
	got, err := enumValues("--state", []string{"queued", "retry-wait"}, AllTaskState)
	require.NoError(t, err)
	require.Equal(t, []string{"QUEUED", "RETRY_WAIT"}, got)
	_, err = enumValues("--kind", []string{"state", "nope"}, eventKinds)
	require.Equal(t, ExitUsage, ExitCode(err))
	require.EqualError(t, err, `--kind "nope": want state, released, stale, lane, engine, batch, session, held, hold-ended, lease-resumed, lagged`)
}
