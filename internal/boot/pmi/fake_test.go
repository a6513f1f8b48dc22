package pmi

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
)

// fakeJob is the server side of PMI-1 for n clients sharing one key-value
// space, behaving like Hydra 4.0 where it matters: values are cut at
// vallen-1 bytes and keys at keylen-1 bytes without complaint, a missing key
// is rc=-1, barrier_out waits for all n.
type fakeJob struct {
	n              int
	keylen, vallen int
	mapping        string

	mu      sync.Mutex
	cond    *sync.Cond
	kv      map[string]string
	arrived int
	gen     int
	lines   []string // every command received, for assertions
}

func newFakeJob(n, keylen, vallen int) *fakeJob {
	j := &fakeJob{n: n, keylen: keylen, vallen: vallen, kv: map[string]string{},
		mapping: fmt.Sprintf("(vector,(0,1,%d))", n)}
	j.cond = sync.NewCond(&j.mu)
	return j
}

// client returns a Client for rank wired to this job over net.Pipe.
func (j *fakeJob) client(t *testing.T, rank int) *Client {
	t.Helper()
	cli, srv := net.Pipe()
	go j.serve(srv)
	t.Cleanup(func() { cli.Close(); srv.Close() })
	return New(cli, rank, j.n)
}

func (j *fakeJob) serve(conn net.Conn) {
	defer conn.Close()
	rd := bufio.NewReader(conn)
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			return
		}
		line = strings.TrimSuffix(line, "\n")
		j.mu.Lock()
		j.lines = append(j.lines, line)
		j.mu.Unlock()
		f := map[string]string{}
		for _, tok := range strings.Fields(line) {
			k, v, _ := strings.Cut(tok, "=")
			f[k] = v
		}
		var out string
		switch f["cmd"] {
		case "init":
			out = "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0"
		case "get_maxes":
			out = fmt.Sprintf("cmd=maxes kvsname_max=256 keylen_max=%d vallen_max=%d", j.keylen, j.vallen)
		case "get_my_kvsname":
			out = "cmd=my_kvsname kvsname=kvs_fake_0"
		case "put":
			k, v := f["key"], f["value"]
			if len(k) > j.keylen-1 {
				k = k[:j.keylen-1]
			}
			if len(v) > j.vallen-1 {
				v = v[:j.vallen-1]
			}
			j.mu.Lock()
			j.kv[k] = v
			j.mu.Unlock()
			out = "cmd=put_result rc=0 msg=success"
		case "get":
			j.mu.Lock()
			v, ok := j.kv[f["key"]]
			j.mu.Unlock()
			switch {
			case f["key"] == "PMI_process_mapping":
				out = "cmd=get_result rc=0 msg=success value=" + j.mapping
			case ok:
				out = "cmd=get_result rc=0 msg=success value=" + v
			default:
				out = "cmd=get_result rc=-1 msg=key_" + f["key"] + "_not_found value=unknown"
			}
		case "barrier_in":
			j.mu.Lock()
			g := j.gen
			j.arrived++
			if j.arrived == j.n {
				j.arrived = 0
				j.gen++
				j.cond.Broadcast()
			}
			for g == j.gen {
				j.cond.Wait()
			}
			j.mu.Unlock()
			out = "cmd=barrier_out"
		case "finalize":
			out = "cmd=finalize_ack"
		case "abort":
			return
		default:
			return // Hydra tears the job down on an unknown command
		}
		if _, err := conn.Write([]byte(out + "\n")); err != nil {
			return
		}
	}
}

func (j *fakeJob) received() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]string(nil), j.lines...)
}

// scripted serves one client: for each command line it calls answer, which
// returns the raw bytes to write back (newline included, or not) and whether
// to close the connection instead of answering.
func scripted(t *testing.T, answer func(line string) (out string, hangup bool)) *Client {
	t.Helper()
	cli, srv := net.Pipe()
	t.Cleanup(func() { cli.Close(); srv.Close() })
	go func() {
		defer srv.Close()
		rd := bufio.NewReader(srv)
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				return
			}
			out, hangup := answer(strings.TrimSuffix(line, "\n"))
			if hangup {
				return
			}
			if _, err := srv.Write([]byte(out)); err != nil {
				return
			}
		}
	}()
	return New(cli, 0, 1)
}

// healthy answers like a one-process Hydra, for scripts that only
// misbehave on one command.
func healthy(line string) string {
	switch {
	case strings.HasPrefix(line, "cmd=init "):
		return "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n"
	case line == "cmd=get_maxes":
		return "cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024\n"
	case line == "cmd=get_my_kvsname":
		return "cmd=my_kvsname kvsname=kvs_1\n"
	case strings.HasPrefix(line, "cmd=put "):
		return "cmd=put_result rc=0 msg=success\n"
	case line == "cmd=barrier_in":
		return "cmd=barrier_out\n"
	case line == "cmd=finalize":
		return "cmd=finalize_ack\n"
	}
	return "cmd=get_result rc=0 msg=success value=1:YQ\n"
}
