package enginetest_test

import "testing"

// TestRetryAfterBackoff runs the package example's scenario, so the example
// cannot rot.
func TestRetryAfterBackoff(t *testing.T) { retryAfterBackoff(t) }
