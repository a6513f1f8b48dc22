//go:build linux

package launch

import (
	"strings"
	"testing"

	"github.com/weft-mpi/weft/internal/testnet"
)

// TestNetworkNamespaces runs a job on three hosts that are network
// namespaces, each with an address of its own, through
// --rsh "ip netns exec {host}": the procs reach the PMI server over the
// bridge, from their own addresses.
func TestNetworkNamespaces(t *testing.T) {
	t.Parallel()
	nw := testnet.New(t, 3)
	hosts := []Host{{nw.Hosts[0].NS, 1}, {nw.Hosts[1].NS, 2}, {nw.Hosts[2].NS, 1}}
	o := launch(t, Config{Ranks: 8, PerProc: 2, Hosts: hosts, Rsh: "ip netns exec {host}", LauncherAddr: nw.Addr, TagOutput: true},
		"addrs", "pmiport", "args", "it's", "$HOME", "")
	if o.err != nil {
		t.Fatal(o.dump())
	}
	got := oks(t, o)
	// 4 procs of 2 ranks: ns0 takes one, ns1 two, ns2 one.
	hostOf := []int{0, 1, 1, 2}
	for p, h := range hostOf {
		f := got[p]
		if f["host"] != nw.Hosts[h].NS || f["mode"] != "port" || f["nodes"] != "[0,1,1,2]" || f["layout"] != "2,2+2,2" {
			t.Errorf("proc %d: %v, want host %s, node map [0,1,1,2], layout 2,2+2,2", p, f, nw.Hosts[h].NS)
		}
		tag := tag(2*p, 2)
		for _, want := range []string{tag + "addrs=" + nw.Hosts[h].Addr + "\n", tag + "PMI_PORT=" + nw.Addr + ":", tag + `args=["it's" "$HOME" ""]` + "\n"} {
			if !strings.Contains(o.stdout, want) {
				t.Errorf("proc %d: no line %q", p, want)
			}
		}
	}
	if t.Failed() {
		t.Log(o.dump())
	}
}
