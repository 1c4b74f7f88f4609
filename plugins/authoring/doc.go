// Package authoring is the library behind `switchyard plugin build | check |
// bench`: it builds a Go policy into a plugin module, checks a module against
// the ABI and a conformance suite, and measures its cost against the native
// built-in policies. Each function returns a report value that prints for
// people and marshals to JSON for machines; the CLI only parses flags.
package authoring
