package postgres

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The database URL in errors and logs keeps which database it is (host,
// port, user, name) and loses every password: the user's, in the URL or
// as a parameter, and the client key's (sslpassword), in either syntax.
func TestRedactURLMasksEveryPassword(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]string{
		"postgres://app:hunter2@db.internal:5432/sy?sslmode=require":                     "postgres://app:xxxxx@db.internal:5432/sy?sslmode=require",
		"postgresql://app@db.internal/sy?password=hunter2":                               "postgresql://app@db.internal/sy?password=xxxxx",
		"postgres://app@db.internal/sy?sslkey=/k.pem&sslpassword=hunter2&sslmode=verify": "postgres://app@db.internal/sy?sslkey=%2Fk.pem&sslmode=verify&sslpassword=xxxxx",
		"host=db.internal user=app password=hunter2 dbname=sy":                           "host=db.internal user=app password=xxxxx dbname=sy",
		"host=db.internal user=app sslpassword='hun ter2' dbname=sy":                     "host=db.internal user=app sslpassword=xxxxx dbname=sy",
	} {
		got := redactURL(raw)
		require.Equal(t, want, got, raw)
		require.False(t, strings.Contains(got, "hunter2") || strings.Contains(got, "hun ter2"), got)
	}
}
