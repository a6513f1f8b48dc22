// Package boot finds out how this proc joins its job. A proc started by `weft run`,
// by MPICH's mpiexec (Hydra) or by Slurm's srun --mpi=pmi2 talks to its launcher
// through PMI-1 (package pmi): it learns its index, where every rank lives, the job's
// id and key, and exchanges the addresses its peers connect to. A proc started by
// none of them is a whole job by itself (the embedded default): Join says so.
package boot

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/weft-mpi/weft/internal/boot/pmi"
	"github.com/weft-mpi/weft/internal/topo"
)

// Job is this proc's place in a job started by a launcher.
type Job struct {
	Layout *topo.Layout // where every rank lives
	Proc   int          // our proc index in Layout
	ID     string       // the job's id
	Key    []byte       // the job key every connection proves it knows
	pmi    *pmi.Client
}

// Environment variables: those weft run sets, and the one users set under other
// launchers.
const (
	EnvLayout  = "WEFT_LAYOUT"   // the ranks of every proc and host (topo.Parse); weft run
	EnvJob     = "WEFT_JOB"      // the job id; weft run
	EnvKey     = "WEFT_KEY"      // the job key in hex; weft run
	EnvPerProc = "WEFT_PER_PROC" // ranks per proc under mpiexec or srun (default 1)
)

// keyBytes is the size of a job key made by proc 0 when the launcher gives none.
const keyBytes = 32

// Join connects to the launcher that started this proc and reads the job's shape.
// It returns nil and no error when no launcher started us. When it fails after
// reaching the launcher it returns the Job too, so that the caller can report the
// error and then Abort the whole job.
func Join() (*Job, error) {
	c, err := pmi.FromEnv()
	if errors.Is(err, pmi.ErrNoLauncher) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if err := c.Init(); err != nil {
		return nil, err
	}
	j := &Job{Proc: c.Rank(), pmi: c}
	if j.Layout, err = layout(c); err != nil {
		return j, err
	}
	j.ID = os.Getenv(EnvJob)
	if j.ID == "" {
		j.ID = c.KVSName()
	}
	if v := os.Getenv(EnvKey); v != "" {
		if j.Key, err = hex.DecodeString(v); err != nil || len(j.Key) < 16 {
			return j, fmt.Errorf("boot: %s is not a job key of at least 16 bytes in hex", EnvKey)
		}
	}
	return j, nil
}

// layout finds where every rank lives: weft run says so in the environment; under
// mpiexec or srun each proc has WEFT_PER_PROC ranks (default 1), on the nodes of
// the launcher's process mapping.
func layout(c *pmi.Client) (*topo.Layout, error) {
	if spec := os.Getenv(EnvLayout); spec != "" {
		l, err := topo.Parse(spec)
		if err != nil {
			return nil, fmt.Errorf("boot: %s: %w", EnvLayout, err)
		}
		if l.Procs() != c.Size() {
			return nil, fmt.Errorf("boot: %s=%s has %d procs but the launcher started %d", EnvLayout, spec, l.Procs(), c.Size())
		}
		return l, nil
	}
	perProc := 1
	if v := os.Getenv(EnvPerProc); v != "" {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("boot: %s=%q: want a positive number of ranks per proc", EnvPerProc, v)
		}
		perProc = n
	}
	var nodes []int
	if blocks, err := c.ProcessMapping(); err == nil {
		nodes, _ = pmi.ExpandMapping(blocks, c.Size())
	}
	return topo.Uneven(hostsOf(nodes, c.Size(), perProc))
}

// hostsOf groups n procs of perProc ranks each by node, as the launcher's process
// mapping (the node of each proc) says. A layout keeps each host's procs
// consecutive, so a mapping that is not (round robin, say), or none at all, makes
// each proc a host of its own: nothing is then shared that is not.
func hostsOf(nodes []int, n, perProc int) [][]int {
	together := len(nodes) == n && slices.IsSorted(nodes)
	var hosts [][]int
	for p := range n {
		if together && p > 0 && nodes[p] == nodes[p-1] {
			hosts[len(hosts)-1] = append(hosts[len(hosts)-1], perProc)
		} else {
			hosts = append(hosts, []int{perProc})
		}
	}
	return hosts
}

// Exchange publishes where this proc listens and, when the launcher gave no job
// key, proc 0's new one; it returns once every proc has published (a barrier).
// On error the caller should Abort the job.
func (j *Job) Exchange(addrs []string) error {
	if j.Key == nil && j.Proc == 0 {
		key := make([]byte, keyBytes)
		if _, err := rand.Read(key); err != nil {
			return fmt.Errorf("boot: making the job key: %w", err)
		}
		if err := j.pmi.Put("weft-key", hex.EncodeToString(key)); err != nil {
			return err
		}
		j.Key = key
	}
	if err := j.pmi.Put(addrKey(j.Proc), strings.Join(addrs, " ")); err != nil {
		return err
	}
	if err := j.pmi.Barrier(); err != nil {
		return err
	}
	if j.Key == nil {
		v, err := j.pmi.Get("weft-key")
		if err == nil {
			j.Key, err = hex.DecodeString(v)
		}
		if err != nil {
			return fmt.Errorf("boot: reading the job key from proc 0: %w", err)
		}
	}
	return nil
}

func addrKey(proc int) string { return "weft-addr-" + strconv.Itoa(proc) }

// Addrs returns where proc listens, as it published with Exchange.
func (j *Job) Addrs(proc int) ([]string, error) {
	v, err := j.pmi.Get(addrKey(proc))
	if err != nil {
		return nil, err
	}
	return strings.Fields(v), nil
}

// Barrier returns once every proc of the job has called it.
func (j *Job) Barrier() error { return j.pmi.Barrier() }

// Abort asks the launcher to end the whole job with exit status code.
func (j *Job) Abort(code int, msg string) error { return j.pmi.Abort(code, msg) }

// Finalize tells the launcher this proc is done.
func (j *Job) Finalize() error { return j.pmi.Finalize() }
