package p2p

import (
	"runtime"
	"sync/atomic"
)

// A large message is copied in chunks that both sides take: whoever arrives second
// starts copying and publishes the job on the request the other side waits for; the
// waiter, spinning or woken from parking, takes chunks too instead of idling, so two
// cores move the data. The copier completes the request once every chunk is done.

const (
	copyChunk = 64 << 10 // bytes a copier takes at a time
	coopMin   = 4 * copyChunk
)

type copyJob struct {
	dst, src []byte
	chunks   int64
	next     atomic.Int64 // chunks taken
	copied   atomic.Int64 // chunks done
}

// help copies chunks until none is left to take.
func (j *copyJob) help() {
	for {
		i := j.next.Add(1) - 1
		if i >= j.chunks {
			return
		}
		lo := int(i) * copyChunk
		hi := min(lo+copyChunk, len(j.dst))
		copy(j.dst[lo:hi], j.src[lo:hi])
		j.copied.Add(1)
	}
}

// copyShared copies src into dst like copy, letting the goroutine that waits for w
// help when the message is large. It returns once every byte is in dst.
func copyShared(dst, src []byte, w *Request) int {
	n := min(len(dst), len(src))
	if n < coopMin {
		return copy(dst, src)
	}
	j := &copyJob{dst: dst[:n], src: src[:n], chunks: int64((n + copyChunk - 1) / copyChunk)}
	w.job.Store(j)
	if wt := w.waiter.Load(); wt != nil {
		wt.ring() // a parked waiter wakes to help: the copy outlasts a wake-up
	}
	j.help()
	for j.copied.Load() < j.chunks {
		runtime.Gosched() // a helper is finishing its last chunk
	}
	return n
}
