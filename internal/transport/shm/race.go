//go:build race

package shm

import "sync/atomic"

// ioSync orders, for the race detector, every write into a ring before every
// later read out of one, as internal/poll does for file descriptors: it sees no
// order through memory that both procs map (golang/go#58020), so a buffer that a
// goroutine wrote into the ring and another reuses once the peer has answered
// through the other ring looked like a race.
var ioSync atomic.Uint64

func raceReleaseWrite() { ioSync.Add(1) }

func raceAcquireRead() { ioSync.Load() }
