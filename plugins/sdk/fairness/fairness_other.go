//go:build !wasip1

package fairness

// Outside a plugin nothing calls the export; Register still records the
// policy, so that a main package builds and vets on any GOOS.
var _ = pick
