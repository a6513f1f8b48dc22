//go:build !linux

package netd

import "errors"

// rawIO: elsewhere a receive daemon always blocks in the poller (Config.Spin is
// ignored) and posted messages always go through the send daemon.
const rawIO = false

var errWouldBlock = errors.New("netd: no raw I/O on this platform")

func rawRead(uintptr, []byte) (int, error)  { return 0, errWouldBlock }
func rawWrite(uintptr, []byte) (int, error) { return 0, errWouldBlock }

type iovec struct{}

func rawWritev(uintptr, [][]byte, int, *[]iovec) (int, error) { return 0, errWouldBlock }
func rawMSS(uintptr) int                                      { return 0 }

// setCongestion: elsewhere the system's congestion control stays, silently
// unless one was named.
func setCongestion(_ uintptr, want string) (string, error) {
	if want == CongestionAuto {
		return "", nil
	}
	return "", errors.New("netd: no choice of TCP congestion control on this platform")
}
