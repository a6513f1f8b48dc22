package netd

import (
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

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

// iovec is an element of a writev(2) vector.
type iovec = syscall.Iovec

// iovMax is the most buffers one writev takes (Linux's UIO_MAXIOV): more is EINVAL.
const iovMax = 1024

// rawWritev is one writev(2) on the socket fd of the first limit bytes of bufs, in
// at most iovMax buffers (bufs holds at least one byte); *iov is scratch space for
// the vector.
func rawWritev(fd uintptr, bufs [][]byte, limit int, iov *[]iovec) (int, error) {
	v := (*iov)[:0]
	for _, b := range bufs {
		if limit == 0 || len(v) == iovMax {
			break
		}
		if len(b) == 0 {
			continue
		}
		k := min(len(b), limit)
		e := syscall.Iovec{Base: &b[0]}
		e.SetLen(k)
		v = append(v, e)
		limit -= k
	}
	*iov = v
	defer clear(v) // do not keep payloads alive
	for {
		n, _, e := syscall.Syscall(syscall.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&v[0])), uintptr(len(v)))
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			return 0, e
		}
		return int(n), nil
	}
}

// rawMSS is the TCP maximum segment size of the socket fd, or 0 if unknown.
func rawMSS(fd uintptr) int {
	mss, err := syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_MAXSEG)
	if err != nil {
		return 0
	}
	return mss
}

// setCongestion applies want (see Config.Congestion) to the TCP socket fd and
// returns the congestion control then in force.
func setCongestion(fd uintptr, want string) (string, error) {
	cur, err := unix.GetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION)
	if err != nil {
		return "", err
	}
	tries := []string{want}
	if want == CongestionAuto {
		if !strings.HasPrefix(cur, "bbr") {
			return cur, nil
		}
		tries = []string{"cubic", "reno"}
	}
	for _, name := range tries {
		if err = unix.SetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION, name); err == nil {
			return name, nil
		}
	}
	return cur, err
}
