package sqlcodec

import (
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"
)

func TestMigrationsReadInVersionOrderAndRefuseGapsAndStrays(t *testing.T) {
	t.Parallel()
	ms, err := Migrations(fstest.MapFS{
		"m/0002_more.sql": {Data: []byte("B")},
		"m/0001_init.sql": {Data: []byte("A")},
	}, "m")
	require.NoError(t, err)
	require.Equal(t, []Migration{{1, "0001_init.sql", "A"}, {2, "0002_more.sql", "B"}}, ms)

	_, err = Migrations(fstest.MapFS{"m/0001_a.sql": {}, "m/0003_c.sql": {}}, "m")
	require.ErrorContains(t, err, "without gaps")
	_, err = Migrations(fstest.MapFS{"m/0001_a.sql": {}, "m/notes.txt": {}}, "m")
	require.ErrorContains(t, err, "want NNNN_name.sql")
}
