// Package shmem is memory shared by the procs of one host: a segment (a sealed
// memfd that each proc maps, gone with the last proc that maps it or holds its
// file, so a proc that dies leaves nothing behind) and a futex, on which a proc
// sleeps until another changes a word of the segment. internal/transport/shm
// builds its rings on it, internal/xcoll the collectives among a host's procs.
package shmem

import (
	"errors"
	"sync/atomic"
	"unsafe"
)

// ErrUnsupported is the error of Create and Map where there are no segments
// (only Linux has them).
var ErrUnsupported = errors.New("shmem: shared-memory segments need Linux")

// Segment is a shared mapping of Mem's length.
type Segment struct {
	Mem []byte
}

// Word32 returns the 32-bit word at offset off of the segment, which must be
// 4-aligned.
func (s *Segment) Word32(off int) *atomic.Uint32 {
	return (*atomic.Uint32)(unsafe.Pointer(&s.Mem[off : off+4][0]))
}

// Word64 returns the 64-bit word at offset off of the segment, which must be
// 8-aligned.
func (s *Segment) Word64(off int) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&s.Mem[off : off+8][0]))
}
