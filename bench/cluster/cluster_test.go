package cluster

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weft-mpi/weft/internal/bench"
	"github.com/weft-mpi/weft/internal/testnet/netns"
)

func TestSettings(t *testing.T) {
	for _, tt := range []struct{ env, value, want string }{
		{EnvHosts, "1", EnvHosts}, {EnvHosts, "17", EnvHosts}, {EnvHosts, "two", EnvHosts},
		{EnvRate, "fast", EnvRate}, {EnvRate, "0gbit", EnvRate},
		{EnvDelay, "-5us", EnvDelay}, {EnvDelay, "soon", EnvDelay}, {EnvDelay, "2s", EnvDelay},
	} {
		t.Run(tt.env+"="+tt.value, func(t *testing.T) {
			t.Setenv(tt.env, tt.value)
			if _, err := readSettings(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("readSettings: %v, want an error naming %s", err, tt.want)
			}
			// The runner then fails every run with the reason.
			if _, err := makeCluster(2); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("makeCluster: %v, want an error naming %s", err, tt.want)
			}
		})
	}
	t.Setenv(EnvHosts, "4")
	t.Setenv(EnvRate, "none")
	t.Setenv(EnvDelay, "100us")
	st, err := readSettings()
	if err != nil || st.hosts != 4 || st.rate != "" || st.delay.String() != "100µs" {
		t.Errorf("readSettings = %+v, %v", st, err)
	}
}

// TestTests: every test is one proc per host, the coll tests use the coll
// twin, and a delay adds Weft-only rows with WEFT_NET_DELAY.
func TestTests(t *testing.T) {
	t.Setenv(EnvHosts, "3")
	t.Setenv(EnvDelay, "50us")
	for _, quick := range []bool{true, false} {
		ts := tests(quick)
		var coll, delayed int
		for _, tc := range ts {
			if tc.Hosts < 2 || tc.PerProc < 1 || tc.Ranks != tc.Hosts*tc.PerProc {
				t.Errorf("test %v: %d ranks, %d per proc, %d hosts", tc.Args, tc.Ranks, tc.PerProc, tc.Hosts)
			}
			switch tc.Args[0] {
			case "-op":
				coll++
				if tc.Twin != "coll.c" || tc.Hosts != 3 || tc.PerProc != 4 {
					t.Errorf("coll test %+v", tc)
				}
			case "-bench":
				if tc.Twin != "" || tc.Hosts != 2 {
					t.Errorf("p2p test %+v", tc)
				}
			default:
				t.Errorf("test %v is neither p2p nor coll", tc.Args)
			}
			if len(tc.Env) > 0 {
				delayed++
				if !tc.Weft || tc.Env[0] != "WEFT_NET_DELAY=50µs" {
					t.Errorf("delayed test %+v", tc)
				}
			}
		}
		if coll < 2 || delayed < 1 {
			t.Errorf("quick %v: %d coll tests, %d delayed", quick, coll, delayed)
		}
	}
}

func TestBody(t *testing.T) {
	if err := body(nil, []string{"-size", "8"}); err == nil || !strings.Contains(err.Error(), "-bench") {
		t.Errorf("body without -bench or -op: %v", err)
	}
}

func TestAcross(t *testing.T) {
	c := &bench.Cluster{Addrs: []string{"10.77.3.2", "10.77.3.3"}, Exec: "/x/on-host", Subnet: "10.77.3.0/24"}
	line, err := across("mpich", c, 4, "wbabc")
	if err != nil || !strings.Contains(strings.Join(line, " "), "-launcher-exec /x/on-host -iface wbabc -hosts 10.77.3.2:4,10.77.3.3:4 -n") {
		t.Errorf("mpich: %q, %v", line, err)
	}
	line, err = across("openmpi", c, 1, "wbabc")
	if err != nil || !strings.Contains(strings.Join(line, " "), "plm_rsh_agent /x/on-host --host 10.77.3.2:1,10.77.3.3:1") ||
		!strings.Contains(strings.Join(line, " "), "btl_tcp_if_include 10.77.3.0/24") {
		t.Errorf("openmpi: %q, %v", line, err)
	}
	if _, err := across("lam", c, 1, "wbabc"); err == nil {
		t.Error("an unknown peer has a launch line")
	}
}

// TestWrapper: the wrapper refuses a host it does not know, as ssh would with
// status 255, whatever options come first.
func TestWrapper(t *testing.T) {
	nw := &netns.Net{Hosts: []netns.Host{{NS: "ns-a", Addr: "10.77.9.2"}}}
	path := filepath.Join(t.TempDir(), "on-host")
	if err := os.WriteFile(path, []byte(wrapper(nw)), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(path, "-x", "10.77.9.99", "echo", "hi").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 255 || !strings.Contains(string(out), "unknown host 10.77.9.99") {
		t.Errorf("unknown host: %v: %s", err, out)
	}
	if !strings.Contains(wrapper(nw), "10.77.9.2) ns=ns-a ;;") {
		t.Errorf("wrapper:\n%s", wrapper(nw))
	}
}

// TestCluster makes the hosts, runs a command line on one through the
// wrapper, and removes them (root and iproute2 only).
func TestCluster(t *testing.T) {
	if err := netns.Available(true); err != nil {
		t.Skip(err)
	}
	c, err := makeCluster(2)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(c.Exec, c.Addrs[1], "ip", "-br", "addr", "show", "dev", "eth0").CombinedOutput()
	if err != nil || !strings.Contains(string(out), c.Addrs[1]+"/24") {
		t.Errorf("through the wrapper on %s: %v: %s", c.Addrs[1], err, out)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	list, _ := exec.Command("ip", "netns", "list").CombinedOutput()
	for _, n := range c.Names {
		if strings.Contains(string(list), n) {
			t.Errorf("namespace %s left after Close", n)
		}
	}
	if _, err := os.Stat(c.Exec); !os.IsNotExist(err) {
		t.Errorf("wrapper left after Close: %v", err)
	}
}

// TestShareEnv: Weft's procs on emulated hosts get each host's share of this
// machine's CPUs, and a crowded host's poll budget when hosts outnumber CPUs.
func TestShareEnv(t *testing.T) {
	for _, tc := range []struct {
		hosts, cpus int
		want        string
	}{
		{2, 2, "GOMAXPROCS=1"},
		{2, 8, "GOMAXPROCS=4"},
		{4, 2, "GOMAXPROCS=1 WEFT_NET_SPIN=20µs"},
		{16, 8, "GOMAXPROCS=1 WEFT_NET_SPIN=20µs"},
	} {
		if got := strings.Join(shareEnv(tc.hosts, tc.cpus), " "); got != tc.want {
			t.Errorf("%d hosts on %d CPUs: %q, want %q", tc.hosts, tc.cpus, got, tc.want)
		}
	}
}
