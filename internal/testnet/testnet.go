//go:build linux

// Package testnet builds small networks of Linux network namespaces for tests:
// hosts with addresses of their own, which a launcher reaches through
// `ip netns exec NS`, all on one bridge with the test machine. Multi-host
// behaviour is then tested on one machine, and only on addresses the test
// created. The namespaces themselves are internal/testnet/netns's.
//
// It needs Linux, root and iproute2's ip; without root or ip, New skips the
// test.
package testnet

import (
	"errors"
	"testing"

	"github.com/weft-mpi/weft/internal/testnet/netns"
)

// Net is a bridge on the test machine and namespaces joined to it: Addr is the
// test machine's address on the bridge, 10.77.X.1, and host i has the address
// 10.77.X.(i+2).
type Net = netns.Net

// Host is one network namespace.
type Host = netns.Host

// New creates a bridge with the address 10.77.X.1/24, for an X no other
// interface of the machine uses, and n namespaces, namespace i with lo up, an
// interface eth0 of address 10.77.X.(i+2)/24 joined to the bridge by a veth
// pair, and a default route through the bridge (see netns.Create). Names carry
// a random id, so tests and packages running at once do not collide.
// t.Cleanup removes it all. Where namespaces cannot be made (no root, no ip, a
// container without CAP_SYS_ADMIN) the test is skipped, and fails for any other
// error.
func New(t testing.TB, n int) *Net {
	t.Helper()
	return NewShaped(t, n, "")
}

// NewShaped is New with every host's link limited to rate in each direction
// (tc's syntax: "1gbit"), by tbf qdiscs; "" leaves the links unshaped.
func NewShaped(t testing.TB, n int, rate string) *Net {
	t.Helper()
	nw, err := netns.Create(n, netns.Options{Rate: rate})
	if errors.Is(err, netns.ErrUnavailable) {
		t.Skipf("testnet: %v", err)
	}
	if err != nil {
		t.Fatalf("testnet: %v", err)
	}
	t.Cleanup(func() {
		if err := nw.Close(); err != nil {
			t.Error(err)
		}
	})
	return nw
}
