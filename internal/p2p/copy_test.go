package p2p

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestCopySharedWithHelper checks that a copy split between the copier and a helper
// that spins on the request delivers every byte, at sizes around the chunk edges.
func TestCopySharedWithHelper(t *testing.T) {
	for _, n := range []int{0, 1, coopMin - 1, coopMin, coopMin + 1, 3*copyChunk + 7, 40 * copyChunk} {
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(rand.IntN(256))
		}
		dst := make([]byte, n+5)
		w := new(Request)
		stop := make(chan struct{})
		helped := make(chan struct{})
		go func() {
			defer close(helped)
			for {
				if j := w.job.Load(); j != nil {
					j.help()
				}
				select {
				case <-stop:
					return
				default:
				}
			}
		}()
		if got := copyShared(dst, src, w); got != n {
			t.Fatalf("n=%d: copied %d", n, got)
		}
		close(stop)
		<-helped
		if !bytes.Equal(dst[:n], src) || !bytes.Equal(dst[n:], make([]byte, 5)) {
			t.Fatalf("n=%d: the destination differs from the source", n)
		}
	}
}
