package netd

import (
	"net"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
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

// congestionOf returns the congestion control of the TCP connection nc.
func congestionOf(t *testing.T, nc net.Conn) string {
	t.Helper()
	rc, err := nc.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var name string
	if cerr := rc.Control(func(fd uintptr) {
		name, err = unix.GetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION)
	}); cerr != nil {
		t.Fatal(cerr)
	}
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// systemCongestion returns the kernel's default congestion control.
func systemCongestion(t *testing.T) string {
	b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_congestion_control")
	if err != nil {
		t.Skip("no default TCP congestion control to read:", err)
	}
	return strings.TrimSpace(string(b))
}

// TestCongestion: both ends of every TCP link of a job take Config.Congestion;
// "" keeps the system's; a name the kernel refuses leaves the system's, the
// links work, and the refusal is logged once.
func TestCongestion(t *testing.T) {
	sys := systemCongestion(t)
	other := "reno"
	if sys == "reno" {
		other = "cubic" // not allowed to everyone: skipped below if refused
	}
	for _, tc := range []struct{ name, want, got string }{
		{"named", other, other},
		{"system", "", sys},
		{"refused", "no-such-cc", sys},
	} {
		t.Run(tc.name, func(t *testing.T) {
			noLeaks(t)
			ps := startJob(t, 2, func(_ int, cfg *Config, _ *tproc) { cfg.Congestion = tc.want })
			for _, ch := range []Channel{ChannelP2P, ChannelColl} {
				if err := ps[0].dev.Send(1, ch, message(ch, 0, 0, 0, 5), payloadOf(0, 0, 0, 5)); err != nil {
					t.Fatal(err)
				}
			}
			waitFor(t, "both messages", func() bool { return ps[1].p2p.count() == 1 && ps[1].coll.count() == 1 })
			for i, p := range ps {
				conns := p.dev.connsTo(1 - i)
				if len(conns) != 2 {
					t.Fatalf("proc %d: %d connections, want 2", i, len(conns))
				}
				for _, c := range conns {
					if got := congestionOf(t, c.nc); got != tc.got {
						if tc.name == "named" && p.log.has("refused") {
							t.Skipf("%s refused here: %s", other, p.log)
						}
						t.Errorf("proc %d, channel %d: congestion control %q, want %q", i, c.ch, got, tc.got)
					}
				}
				refusals := strings.Count(p.log.String(), "refused")
				if want := map[bool]int{true: 1}[tc.name == "refused"]; refusals != want {
					t.Errorf("proc %d logged %d refusals, want %d:\n%s", i, refusals, want, p.log)
				}
			}
		})
	}
}

// TestCongestionAuto: CongestionAuto replaces BBR, which paces its sends, by
// cubic or reno, and keeps reno.
func TestCongestionAuto(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, tc := range []struct {
		from string
		want []string
	}{
		{"bbr", []string{"cubic", "reno"}},
		{"reno", []string{"reno"}},
	} {
		nc, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		rc, _ := nc.(*net.TCPConn).SyscallConn()
		var got string
		_ = rc.Control(func(fd uintptr) {
			if err = unix.SetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION, tc.from); err != nil {
				return
			}
			got, err = setCongestion(fd, CongestionAuto)
		})
		if err != nil {
			nc.Close()
			t.Logf("from %s: %v (not available here)", tc.from, err)
			continue
		}
		if now := congestionOf(t, nc); !slices.Contains(tc.want, got) || now != got {
			t.Errorf("from %s: setCongestion says %q, the socket has %q; want one of %v", tc.from, got, now, tc.want)
		}
		nc.Close()
	}
}
