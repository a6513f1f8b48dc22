package p2p

import (
	"runtime"
	"sync/atomic"
)

// spinLock guards an endpoint. Its critical sections are a few dozen nanoseconds
// and never block, so a contender spins and then yields its processor rather than
// sleep on a semaphore as sync.Mutex does: with many goroutine ranks per core, that
// sleep and its wake-up cost far more than the wait.
type spinLock struct{ v atomic.Uint32 }

// lockSpins is how many times a contender polls before yielding.
const lockSpins = 64

// Lock takes the lock: inlined when it is free, as it nearly always is.
func (l *spinLock) Lock() {
	if !l.v.CompareAndSwap(0, 1) {
		l.contend()
	}
}

// contend waits for the lock and takes it.
func (l *spinLock) contend() {
	for !l.v.CompareAndSwap(0, 1) {
		for i := 0; l.v.Load() != 0; i++ {
			if i == lockSpins {
				runtime.Gosched()
				i = 0
			}
		}
	}
}

// TryLock takes the lock if it is free and reports whether it did.
func (l *spinLock) TryLock() bool { return l.v.Load() == 0 && l.v.CompareAndSwap(0, 1) }

func (l *spinLock) Unlock() { l.v.Store(0) }
