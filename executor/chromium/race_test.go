//go:build race

package chromium_test

// raceEnabled says the race detector is on: it slows everything down
// several times, which timing bounds must allow for.
const raceEnabled = true
