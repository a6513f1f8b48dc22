//go:build !race

package limits

import (
	"sync/atomic"
	"unsafe"
)

// publish stores v in *p with release order, as Weft's mailbox publishes a slot:
// x86 keeps stores in order, so a plain store is one, and a call the compiler
// cannot see into keeps other accesses from moving across it.
//
//go:noinline
func publish(p *atomic.Uint64, v uint64) { *(*uint64)(unsafe.Pointer(p)) = v }
