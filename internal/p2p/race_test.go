//go:build race

package p2p

// raceEnabled says the race detector is on: everything runs several times slower,
// so tests of what depends on timing (a send within streamGap of the last) skip it.
const raceEnabled = true
