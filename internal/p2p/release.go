//go:build amd64 && !race

package p2p

import (
	"sync/atomic"
	"unsafe"
)

// storeRelease stores v in *p with release order: every load and store before it
// is seen before it, and no more. Go's atomic stores are sequentially consistent,
// on amd64 an XCHG, which also waits until every store before it has left the
// core; on a small message's path the slot's publication and the receiver's move
// of its lane's head were two of them (an 8-byte send and its receive by one rank:
// 62.8 against 53.9 ns, medians of 8 interleaved rounds). x86 keeps stores in
// order, after the loads before them, so a plain store is a release store, and a
// call the compiler cannot see into (noinline) keeps it from moving memory
// accesses across the store. Only where no load after it must wait for it: a wait
// that parks on what it publishes must find it through another word stored with a
// fence (see Endpoint.pending). Under the race detector, and on other
// architectures, it is the atomic store (release_other.go).
//
//go:noinline
func storeRelease(p *atomic.Uint64, v uint64) { *(*uint64)(unsafe.Pointer(p)) = v }
