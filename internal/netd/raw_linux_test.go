package netd

import (
	"syscall"
	"testing"
)

// TestWritevManyBuffers: a batch of more buffers than one writev takes (a send
// daemon's queue of thousands of small messages) is written in several calls,
// not refused with EINVAL.
func TestWritevManyBuffers(t *testing.T) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fds[0])
	defer syscall.Close(fds[1])
	const n = 3 * iovMax
	bufs := make([][]byte, n)
	for i := range bufs {
		bufs[i] = []byte{byte(i)}
	}
	var iov []iovec
	total := 0
	for total < n {
		k, err := rawWritev(uintptr(fds[0]), bufs[total:], n, &iov)
		if err != nil {
			t.Fatalf("after %d of %d bytes: %v", total, n, err)
		}
		if k > iovMax {
			t.Fatalf("one writev took %d buffers, want at most %d", k, iovMax)
		}
		total += k
	}
	got := make([]byte, 0, n)
	buf := make([]byte, n)
	for len(got) < n {
		k, err := syscall.Read(fds[1], buf)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, buf[:k]...)
	}
	for i, b := range got {
		if b != byte(i) {
			t.Fatalf("byte %d is %d, want %d", i, b, byte(i))
		}
	}
}
