//go:build race

package xcoll

// raceEnabled says the race detector is on: sync.Pool then drops some of what it is
// given, on purpose, so tests of recycling cannot count allocations.
const raceEnabled = true
