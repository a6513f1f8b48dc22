package bench

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Weft is the impl name of Weft's side in result lines and tables.
const Weft = "weft"

// PeerSpec says how to build and start one C MPI.
type PeerSpec struct {
	Name     string // the impl name in result lines: mpich, openmpi
	CC       string // its compiler wrapper, found on PATH
	Launcher string // its launcher, found on PATH
	// Shm and TCP are the launch line up to the rank count (which follows
	// them, then the program): shared memory between processes, and TCP as
	// between hosts. TCP's may start with NAME=VALUE settings for the
	// environment.
	Shm, TCP []string
	// Version describes the installed version ("" when it cannot tell).
	Version func() string
}

// DefaultPeers are the C MPIs of this machine's distribution: MPICH and
// Open MPI as Debian and Ubuntu install them side by side.
var DefaultPeers = []PeerSpec{
	{
		Name: "mpich", CC: "mpicc.mpich", Launcher: "mpiexec.mpich",
		Shm: []string{"mpiexec.mpich", "-n"},
		// NOLOCAL sends ranks of one host through the netmod (UCX), and
		// UCX_TLS keeps UCX to TCP.
		TCP:     []string{"MPIR_CVAR_NOLOCAL=1", "UCX_TLS=tcp,self", "mpiexec.mpich", "-n"},
		Version: mpichVersion,
	},
	{
		Name: "openmpi", CC: "mpicc.openmpi", Launcher: "mpirun.openmpi",
		// As root in containers, more ranks than cores, several per core;
		// ob1 with vader is shared memory and provides MPI_THREAD_MULTIPLE.
		Shm: []string{"mpirun.openmpi", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none",
			"--mca", "pml", "ob1", "--mca", "btl", "self,vader", "-n"},
		TCP: []string{"mpirun.openmpi", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none",
			"--mca", "pml", "ob1", "--mca", "btl", "tcp,self", "-n"},
		Version: func() string { return firstLine("mpirun.openmpi", "--version") },
	},
}

// Peer is a C MPI as this run found it.
type Peer struct {
	PeerSpec `json:"-"`
	Name     string `json:"name"`
	Status   string `json:"status"` // ok, absent or failed
	Why      string `json:"why,omitempty"`
	Version  string `json:"version,omitempty"`
	Bin      string `json:"bin,omitempty"` // the twin built with its compiler
}

// Note is the peer's state for a reader: "mpich: MPICH 4.0.2 (ch4:ucx)" or
// "openmpi: absent: mpicc.openmpi not found".
func (p *Peer) Note() string {
	if p.Status == "ok" {
		return p.Name + ": " + p.Version
	}
	return p.Name + ": " + p.Status + ": " + p.Why
}

// command is the argv and extra environment that start ranks ranks of the
// twin, over TCP or shared memory.
func (p *Peer) command(ranks int, tcp bool, args []string) (argv, env []string) {
	line := p.Shm
	if tcp {
		line = p.TCP
	}
	for len(line) > 0 && strings.Contains(line[0], "=") {
		env, line = append(env, line[0]), line[1:]
	}
	argv = append(append(slices.Clone(line), strconv.Itoa(ranks), p.Bin), args...)
	return argv, env
}

// findPeer looks for spec's compiler and launcher and builds the twin named
// twin from src with it, into a directory of cache named by a hash of the
// source and the compiler, once. A missing piece makes the peer absent, a
// failed build failed; both say why.
func findPeer(spec PeerSpec, src fs.FS, twin, cache string) *Peer {
	p := &Peer{PeerSpec: spec, Name: spec.Name, Status: "absent"}
	if twin == "" {
		p.Why = "the suite has no C twin"
		return p
	}
	cc, err := exec.LookPath(spec.CC)
	if err != nil {
		p.Why = spec.CC + " not found"
		return p
	}
	if _, err := exec.LookPath(spec.Launcher); err != nil {
		p.Why = spec.Launcher + " not found"
		return p
	}
	files, err := twinFiles(src, twin)
	if err != nil {
		p.Status, p.Why = "failed", fmt.Sprintf("twin %s: %v", twin, err)
		return p
	}
	if spec.Version != nil {
		p.Version = spec.Version()
	}
	if p.Version == "" {
		p.Version = "version unknown"
	}
	show, _ := exec.Command(cc, "-show").CombinedOutput()
	h := sha256.New()
	for _, f := range files {
		for _, part := range [][]byte{[]byte(f.name), f.code} {
			h.Write(part)
			h.Write([]byte{0})
		}
	}
	for _, part := range [][]byte{[]byte(cc), show} {
		h.Write(part)
		h.Write([]byte{0})
	}
	dir := filepath.Join(cache, hex.EncodeToString(h.Sum(nil))[:16])
	p.Bin = filepath.Join(dir, strings.TrimSuffix(twin, ".c")+"."+spec.Name)
	if _, err := os.Stat(p.Bin); err == nil {
		p.Status = "ok"
		return p
	}
	if err := build(cc, dir, twin, files, p.Bin); err != nil {
		p.Status, p.Why, p.Bin = "failed", err.Error(), ""
		return p
	}
	p.Status = "ok"
	return p
}

// source is one file a twin is built from.
type source struct {
	name string
	code []byte
}

// twinFiles reads the twin and every header beside it in src (twin.h): the
// twin first.
func twinFiles(src fs.FS, twin string) ([]source, error) {
	code, err := fs.ReadFile(src, twin)
	if err != nil {
		return nil, err
	}
	files := []source{{twin, code}}
	headers, err := fs.Glob(src, "*.h")
	if err != nil {
		return nil, err
	}
	for _, name := range headers {
		code, err := fs.ReadFile(src, name)
		if err != nil {
			return nil, err
		}
		files = append(files, source{name, code})
	}
	return files, nil
}

// Compile builds twin, a file of src, with the headers beside it in src, with
// cc -O2 and flags into bin (the suites' tests add -Wall -Werror).
func Compile(cc string, src fs.FS, twin, bin string, flags ...string) error {
	files, err := twinFiles(src, twin)
	if err != nil {
		return err
	}
	return build(cc, filepath.Dir(bin), twin, files, bin, flags...)
}

// build compiles the twin (files[0]) with cc -O2 and flags into bin, its
// headers beside it, through a temporary name so that an interrupted build
// leaves nothing a later run would take as built.
func build(cc, dir, twin string, files []source, bin string, flags ...string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.name), f.code, 0o644); err != nil {
			return err
		}
	}
	src := filepath.Join(dir, twin)
	tmp := bin + ".tmp" + strconv.Itoa(os.Getpid())
	args := append(append([]string{"-O2"}, flags...), "-o", tmp, src, "-lpthread")
	out, err := exec.Command(cc, args...).CombinedOutput()
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("%s -O2 %s failed: %v: %s", filepath.Base(cc), twin, err, tail(out, 5))
	}
	return os.Rename(tmp, bin)
}

// mpichVersion is "MPICH 4.0.2 (ch4:ucx)" from mpichversion.
func mpichVersion() string {
	out, err := exec.Command("mpichversion").Output()
	if err != nil {
		return firstLine("mpiexec.mpich", "--version")
	}
	var version, device string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ":")
		switch strings.TrimSpace(k) {
		case "MPICH Version":
			version = strings.TrimSpace(v)
		case "MPICH Device":
			device = strings.TrimSpace(v)
		}
	}
	if version == "" {
		return ""
	}
	if device != "" {
		return "MPICH " + version + " (" + device + ")"
	}
	return "MPICH " + version
}

// firstLine is the first non-empty line a command prints, "" if it fails.
func firstLine(name string, args ...string) string {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(out), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return l
		}
	}
	return ""
}

// tail is the last n lines of out, joined by " | ".
func tail(out []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
