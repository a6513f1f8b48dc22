package boot

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/weft-mpi/weft/internal/launch"
	"github.com/weft-mpi/weft/internal/topo"
)

func TestHostsOf(t *testing.T) {
	for _, tt := range []struct {
		nodes []int
		n     int
		want  string
	}{
		{[]int{0, 0, 0}, 3, "2+2+2"},
		{[]int{0, 0, 1, 1}, 4, "2+2,2+2"},
		{[]int{0, 1, 0, 1}, 4, "2,2,2,2"}, // round robin: a host per proc
		{nil, 3, "2,2,2"},                 // no mapping
		{[]int{0}, 3, "2,2,2"},            // a mapping of the wrong size
	} {
		l, err := topo.Uneven(hostsOf(tt.nodes, tt.n, 2))
		if err != nil {
			t.Fatal(err)
		}
		if want, _ := topo.Parse(tt.want); !l.Equal(want) {
			t.Errorf("hostsOf(%v, %d, 2) = %v, want %s", tt.nodes, tt.n, l, tt.want)
		}
	}
}

// helperEnv makes the test binary, re-executed by a launcher, a proc that joins.
const helperEnv = "WEFT_BOOT_TEST"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(joinAndReport())
	}
	os.Exit(m.Run())
}

// joinAndReport joins, exchanges a made-up address, and prints what it learnt:
// proc, layout, key length and every proc's addresses.
func joinAndReport() int {
	j, err := Join()
	if err != nil || j == nil {
		fmt.Fprintln(os.Stderr, "join:", j, err)
		return 1
	}
	if err := j.Exchange([]string{fmt.Sprintf("addr-of-%d:1", j.Proc), "second:2"}); err != nil {
		fmt.Fprintln(os.Stderr, "exchange:", err)
		return 1
	}
	var all []string
	for p := range j.Layout.Procs() {
		a, err := j.Addrs(p)
		if err != nil {
			fmt.Fprintln(os.Stderr, "addrs:", err)
			return 1
		}
		all = append(all, strings.Join(a, "|"))
	}
	fmt.Printf("proc %d layout %s key %d job-set %v addrs %s\n", j.Proc, j.Layout, len(j.Key), j.ID != "", strings.Join(all, ";"))
	if err := j.Barrier(); err != nil {
		return 1
	}
	if err := j.Finalize(); err != nil {
		return 1
	}
	return 0
}

// joinLines runs the helper under weft run (launch) and returns its lines, sorted.
func joinLines(t *testing.T, cfg launch.Config) []string {
	t.Helper()
	var out, errOut bytes.Buffer
	cfg.Program, cfg.Stdout, cfg.Stderr = os.Args[0], &out, &errOut
	cfg.Env = append(os.Environ(), helperEnv+"=1")
	if err := launch.Run(cfg); err != nil {
		t.Fatalf("%v\nstderr:\n%s", err, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	slices.Sort(lines)
	return lines
}

// TestJoinWeftRun: under weft run a proc learns the layout (uneven here), its
// index, the launcher's key and every proc's addresses.
func TestJoinWeftRun(t *testing.T) {
	checkJoined(t, joinLines(t, launch.Config{Ranks: 5, PerProc: 2}), "2+2+1")
}

// checkJoined checks the lines of three procs that joined a job of layout l.
func checkJoined(t *testing.T, got []string, l string) {
	t.Helper()
	addrs := "addr-of-0:1|second:2;addr-of-1:1|second:2;addr-of-2:1|second:2"
	var want []string
	for p := range 3 {
		want = append(want, fmt.Sprintf("proc %d layout %s key 32 job-set true addrs %s", p, l, addrs))
	}
	if !slices.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestJoinHydra: under MPICH's mpiexec, each proc has WEFT_PER_PROC ranks, the
// procs of the one host share it, and proc 0's key reaches every proc.
func TestJoinHydra(t *testing.T) {
	mpiexec, err := exec.LookPath("mpiexec.mpich")
	if err != nil {
		t.Skip("mpiexec.mpich is not installed (Debian package mpich)")
	}
	cmd := exec.Command(mpiexec, "-n", "3", os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"=1", EnvPerProc+"=2")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\nstderr:\n%s", err, errOut.String())
	}
	got := strings.Split(strings.TrimSpace(out.String()), "\n")
	slices.Sort(got)
	checkJoined(t, got, "[2;3;1]")
}

// TestJoinAlone: without a launcher, Join says so.
func TestJoinAlone(t *testing.T) {
	t.Setenv("PMI_FD", "")
	t.Setenv("PMI_PORT", "")
	if j, err := Join(); j != nil || err != nil {
		t.Fatalf("Join() = %v, %v; want nil, nil", j, err)
	}
}

// TestJoinBadEnvironment: a bad layout or key from the environment is an error
// that the launcher is told about (the job ends), not a guess.
func TestJoinBadEnvironment(t *testing.T) {
	for _, env := range []string{"WEFT_LAYOUT=3+x", "WEFT_LAYOUT=4", "WEFT_KEY=nothex", "WEFT_KEY=abcd", "WEFT_PER_PROC=0"} {
		t.Run(env, func(t *testing.T) {
			mpiexec, err := exec.LookPath("mpiexec.mpich")
			if err != nil {
				t.Skip("mpiexec.mpich is not installed")
			}
			name, _, _ := strings.Cut(env, "=")
			// Hydra ends the job when the first proc exits non-zero and now and
			// then drops output still in its pipes: three tries.
			for try := 1; ; try++ {
				var out, errOut bytes.Buffer
				cmd := exec.Command(mpiexec, "-n", "2", os.Args[0])
				cmd.Env = append(os.Environ(), helperEnv+"=1", env)
				cmd.Stdout, cmd.Stderr = &out, &errOut
				if err := cmd.Run(); err == nil {
					t.Fatalf("a job with %s succeeded:\n%s", env, out.String())
				}
				if strings.Contains(errOut.String(), name) {
					break
				}
				if try == 3 {
					t.Fatalf("the error does not name %s:\n%s", name, errOut.String())
				}
			}
		})
	}
}
