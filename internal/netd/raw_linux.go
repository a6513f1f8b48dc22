package netd

import "syscall"

// rawIO: non-blocking reads and writes through syscall.RawConn are available,
// for the receive daemon's polling and Post's inline writes.
const rawIO = true

// errWouldBlock is what a non-blocking read or write returns when it cannot go on.
const errWouldBlock = syscall.EAGAIN

// rawRead is one read(2) on the socket fd, which Go keeps non-blocking.
func rawRead(fd uintptr, b []byte) (int, error) {
	for {
		n, err := syscall.Read(int(fd), b)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		return n, nil
	}
}

// rawWrite is one write(2) on the socket fd.
func rawWrite(fd uintptr, b []byte) (int, error) {
	for {
		n, err := syscall.Write(int(fd), b)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		return n, nil
	}
}

// osYield gives the processor to another thread of the system that is ready to
// run, if any: a polling daemon never sleeps, and without this the kernel work
// its messages need (softirq threads) and the threads its hand-offs wake wait
// for the scheduler to preempt it. Measured here: a ping-pong between two procs
// at GOMAXPROCS=1 took 33 µs one way with runtime.Gosched alone, 5 µs with both.
func osYield() { _, _, _ = syscall.Syscall(syscall.SYS_SCHED_YIELD, 0, 0, 0) }
