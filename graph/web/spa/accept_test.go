package spa

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAcceptsGzipFollowsQualityValues(t *testing.T) {
	t.Parallel()
	for header, want := range map[string]bool{
		"":                    false,
		"gzip":                true,
		"GZIP":                true,
		"x-gzip":              true,
		"br":                  false,
		"deflate, gzip;q=0.5": true,
		"gzip;q=0":            false,
		"gzip; q=0.0":         false,
		"*":                   true,
		"*;q=0":               false,
		"gzip;q=0, *":         false,
		"br, *;q=0.1":         true,
		"identity":            false,
	} {
		require.Equal(t, want, acceptsGzip(header), "Accept-Encoding: %q", header)
	}
}
