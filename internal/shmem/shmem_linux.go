package shmem

import (
	"fmt"
	"os"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Create makes a segment of n bytes and returns it with its file, which the
// caller hands to the other procs (or lets them open) and then closes.
func Create(n int) (*Segment, *os.File, error) {
	fd, err := unix.MemfdCreate("weft-shm", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, nil, fmt.Errorf("shmem: memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), "weft-shm")
	if err := f.Truncate(int64(n)); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("shmem: sizing the segment: %w", err)
	}
	if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, sealed); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("shmem: sealing the segment: %w", err)
	}
	s, err := Map(f, n)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return s, f, nil
}

// sealed are the seals of a segment's file: nobody may resize it, so a peer can
// never make our accesses to the mapping fault (a shrunk file would, SIGBUS).
const sealed = unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_SEAL

// Map maps the file f of a segment that must be n bytes long and sealed.
func Map(f *os.File, n int) (*Segment, error) {
	seals, err := unix.FcntlInt(f.Fd(), unix.F_GET_SEALS, 0)
	if err != nil {
		return nil, fmt.Errorf("shmem: the segment's seals: %w", err)
	}
	if seals&sealed != sealed {
		return nil, fmt.Errorf("shmem: segment not sealed against resizing (seals %#x)", seals)
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("shmem: stat of the segment: %w", err)
	}
	if fi.Size() != int64(n) {
		return nil, fmt.Errorf("shmem: segment of %d bytes, want %d", fi.Size(), n)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("shmem: mmap of the segment: %w", err)
	}
	return &Segment{Mem: mem}, nil
}

// Unmap ends the mapping; the segment must not be used after.
func (s *Segment) Unmap() error {
	if s.Mem == nil {
		return nil
	}
	err := unix.Munmap(s.Mem)
	s.Mem = nil
	return err
}

// Sleep waits until *w is no longer old, another proc wakes it (Wake), or d
// passes; it may also return early for no reason, so callers look again. The
// word must be in a segment: the futex is shared between processes.
func Sleep(w *atomic.Uint32, old uint32, d time.Duration) {
	ts := unix.NsecToTimespec(int64(d))
	_, _, _ = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), futexWait, uintptr(old), uintptr(unsafe.Pointer(&ts)), 0, 0)
}

// The futex operations (linux/futex.h); not the _PRIVATE ones, since the
// sleepers are other processes.
const (
	futexWait = 0
	futexWake = 1
)

// Wake wakes every proc sleeping on w.
func Wake(w *atomic.Uint32) {
	_, _, _ = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), futexWake, uintptr(1<<31-1), 0, 0, 0)
}
