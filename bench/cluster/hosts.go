package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/weft-mpi/weft/internal/bench"
	"github.com/weft-mpi/weft/internal/testnet/netns"
	"github.com/weft-mpi/weft/mpi"
)

// makeCluster is the suite's bench.Suite.Cluster: n namespaces on a bridge,
// shaped, and the wrapper the peers' launchers start processes through.
func makeCluster(n int) (*bench.Cluster, error) {
	st, err := readSettings()
	if err != nil {
		return nil, err
	}
	if err := netns.Available(st.rate != ""); err != nil {
		return nil, fmt.Errorf("the cluster suite needs root and iproute2 (ip, tc): %w", err)
	}
	nw, err := netns.Create(n, netns.Options{Prefix: "weft-bench-", Rate: st.rate})
	if err != nil {
		return nil, fmt.Errorf("the cluster suite needs root and iproute2 (ip, tc): %w", err)
	}
	dir, err := os.MkdirTemp("", "weft-bench-cluster-")
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "on-host"), []byte(wrapper(nw)), 0o755)
	}
	closeAll := func() error {
		errs := []error{nw.Close()}
		if dir != "" {
			errs = append(errs, os.RemoveAll(dir))
		}
		return errors.Join(errs...)
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("writing the launch wrapper: %w", err), closeAll())
	}
	c := &bench.Cluster{
		Rsh: "ip netns exec {host}", LauncherAddr: nw.Addr, Exec: filepath.Join(dir, "on-host"),
		Subnet: nw.Subnet, Close: closeAll, Env: shareEnv(n, runtime.NumCPU()),
		Across: func(peer string, c *bench.Cluster, perHost int) ([]string, error) {
			return across(peer, c, perHost, nw.Bridge)
		},
	}
	for _, h := range nw.Hosts {
		c.Names, c.Addrs = append(c.Names, h.NS), append(c.Addrs, h.Addr)
	}
	shaped := "unshaped"
	if st.rate != "" {
		shaped = "tbf " + st.rate + " each way"
	}
	c.Note = fmt.Sprintf("%d hosts %s (%s) on bridge %s, %s", n, strings.Join(c.Names, ","), strings.Join(c.Addrs, ","), nw.Bridge, shaped)
	if ok, why := netns.NetemAvailable(); !ok {
		c.Note += "; no netem here (" + why + "): latency only through " + EnvDelay + ", Weft's in-process delay"
	}
	return c, nil
}

// shareEnv is the environment of Weft's procs on hosts emulated hosts: each
// host's share of this machine's cpus, and with more hosts than cpus the poll
// budget of a crowded host. Weft sizes a proc by its host's CPUs (mpi.Main),
// and these hosts all run on this machine's: two procs that each took both
// cores polled against each other (8-byte ping-pong 21 µs instead of 6).
func shareEnv(hosts, cpus int) []string {
	env := []string{"GOMAXPROCS=" + strconv.Itoa(max(1, cpus/hosts))}
	if hosts > cpus {
		env = append(env, "WEFT_NET_SPIN="+mpi.CrowdedNetSpin.String())
	}
	return env
}

// wrapper is an ssh-like program for the peers' launchers: `on-host [-opts]
// ADDR WORDS...` runs WORDS, joined by spaces, with sh in the namespace whose
// address is ADDR, as ssh runs a command line with the remote login shell.
func wrapper(nw *netns.Net) string {
	var b strings.Builder
	b.WriteString("#!/bin/sh\n# weft bench cluster: run a command line on an emulated host, as ssh would.\n")
	b.WriteString("while [ $# -gt 0 ]; do case $1 in -*) shift ;; *) break ;; esac; done\n")
	b.WriteString("host=$1\nshift\ncase $host in\n")
	for _, h := range nw.Hosts {
		fmt.Fprintf(&b, "%s) ns=%s ;;\n", h.Addr, h.NS)
	}
	b.WriteString("*) echo \"on-host: unknown host $host\" >&2; exit 255 ;;\nesac\n")
	b.WriteString("exec ip netns exec \"$ns\" sh -c \"$*\"\n")
	return b.String()
}

// across is bench.Cluster.Across: how MPICH and Open MPI start perHost
// processes on each host of c, whose bridge is this machine's interface.
func across(peer string, c *bench.Cluster, perHost int, bridge string) ([]string, error) {
	hosts := make([]string, len(c.Addrs))
	for i, a := range c.Addrs {
		hosts[i] = a + ":" + strconv.Itoa(perHost)
	}
	switch peer {
	case "mpich":
		// Hydra starts a proxy per host through Exec as through ssh, which
		// calls back on the bridge's address (-iface; this machine's host name
		// is loopback inside a namespace); UCX keeps to TCP on eth0.
		return []string{"UCX_TLS=tcp,self", "UCX_NET_DEVICES=eth0", "mpiexec.mpich", "-launcher", "ssh",
			"-launcher-exec", c.Exec, "-iface", bridge, "-hosts", strings.Join(hosts, ","), "-n"}, nil
	case "openmpi":
		// orted starts through Exec as through ssh; its wire-up and the tcp
		// BTL keep to the hosts' subnet. Not vader: every namespace has this
		// machine's host name, so the hosts' orteds share one session
		// directory and their shared-memory files collide (ranks segfault).
		return []string{"mpirun.openmpi", "--allow-run-as-root", "--bind-to", "none", "--mca", "plm_rsh_agent", c.Exec,
			"--host", strings.Join(hosts, ","), "--mca", "pml", "ob1", "--mca", "btl", "tcp,self",
			"--mca", "btl_tcp_if_include", c.Subnet, "--mca", "oob_tcp_if_include", c.Subnet, "-n"}, nil
	}
	return nil, fmt.Errorf("the cluster suite knows no way to start %s across network namespaces", peer)
}
