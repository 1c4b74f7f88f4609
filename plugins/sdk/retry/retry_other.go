//go:build !wasip1

package retry

// Outside a plugin nothing calls the export; Register still records the
// policy, so that a main package builds and vets on any GOOS.
var _ = decide
