//go:build unix

package launch

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weft-mpi/weft/internal/testout"
)

// TestMPICH runs a C program built with MPICH under weft run: MPICH's own
// libpmi joins the job through PMI_FD, exchanges its addresses in the
// key-value space and reads PMI_process_mapping, and its MPI_Abort ends the
// job with the abort's code.
func TestMPICH(t *testing.T) {
	t.Parallel()
	mpicc, err := exec.LookPath("mpicc.mpich")
	if err != nil {
		t.Skip("mpicc.mpich is not on PATH; install Debian's mpich (libmpich-dev) to run this test")
	}
	prog := filepath.Join(t.TempDir(), "hello")
	if out, err := exec.Command(mpicc, "-o", prog, filepath.Join("testdata", "mpich_hello.c")).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", mpicc, err, out)
	}
	for _, tc := range []struct {
		name string
		args []string
	}{{"allreduce", nil}, {"abort", []string{"1"}}} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr := testout.New(), testout.New()
			// UCX only over shared memory: at MPI_Init it opens every network device,
			// and the network-namespace tests of other packages add and remove some.
			env := append(os.Environ(), "UCX_TLS=self,sm")
			err := Run(Config{Ranks: 3, Program: prog, Args: tc.args, Env: env, Stdout: stdout, Stderr: stderr, TagOutput: true})
			o := outcome{err: err, stdout: stdout.String(), stderr: stderr.String()}
			if tc.args == nil {
				if err != nil {
					t.Fatal(o.dump())
				}
				for r := range 3 {
					if want := fmt.Sprintf("[rank %d] rank %d of 3 sum 6\n", r, r); !strings.Contains(o.stdout, want) {
						t.Errorf("no line %q\n%s", want, o.dump())
					}
				}
				return
			}
			wantFailure(t, o, 9, 1, "localhost", "rank 1", "aborted the job with exit code 9")
		})
	}
}
