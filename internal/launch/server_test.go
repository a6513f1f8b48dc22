package launch

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weft-mpi/weft/internal/boot/pmi"
)

// recorder is a job that remembers what the server told it.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) note(format string, a ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, fmt.Sprintf(format, a...))
}

func (r *recorder) aborted(proc, code int, msg string) { r.note("abort %d %d %q", proc, code, msg) }
func (r *recorder) stranded(proc, gone int)            { r.note("stranded %d %d", proc, gone) }
func (r *recorder) refused(addr, why string)           { r.note("refused %s", why) }

func (r *recorder) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...)
}

const testKVS = "kvs-test"

// testServer is a server for len(tokens) procs; those with no token are local
// and get a connection here, over net.Pipe.
func testServer(t *testing.T, tokens ...string) (*server, *recorder, []net.Conn) {
	t.Helper()
	rec := &recorder{}
	s := newServer(testKVS, fmt.Sprintf("(vector,(0,1,%d))", len(tokens)), tokens, rec)
	t.Cleanup(s.close)
	conns := make([]net.Conn, len(tokens))
	for p, tok := range tokens {
		if tok != "" {
			continue
		}
		cli, srv := net.Pipe()
		t.Cleanup(func() { cli.Close() })
		s.attach(p, srv)
		conns[p] = cli
	}
	return s, rec, conns
}

// talk sends line and returns the reply, or "EOF" when the server hung up.
func talk(t *testing.T, c net.Conn, r *bufio.Reader, line string) string {
	t.Helper()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	// net.Pipe has no buffer: write while the reply is read, for a server
	// that answers before it has read the whole line.
	go io.WriteString(c, line+"\n")
	reply, err := r.ReadString('\n')
	if errors.Is(err, io.EOF) {
		return "EOF"
	}
	if err != nil {
		t.Fatalf("after %q: %v", line, err)
	}
	return strings.TrimSuffix(reply, "\n")
}

func TestServerReplies(t *testing.T) {
	s, _, conns := testServer(t, "")
	c := conns[0]
	r := bufio.NewReader(c)
	put := "cmd=put kvsname=" + testKVS + " key="
	get := "cmd=get kvsname=" + testKVS + " key="
	for _, step := range []struct{ send, want string }{
		{"cmd=init pmi_version=2 pmi_subversion=0", "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=-1 msg=only_pmi_version_1_is_served"},
		{"cmd=init pmi_version=1 pmi_subversion=1", "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0"},
		{"cmd=get_maxes", "cmd=maxes rc=0 kvsname_max=256 keylen_max=64 vallen_max=1024"},
		{"cmd=get_appnum", "cmd=appnum rc=0 appnum=0"},
		{"cmd=get_universe_size", "cmd=universe_size rc=0 size=1"},
		{"cmd=get_my_kvsname", "cmd=my_kvsname rc=0 kvsname=" + testKVS},
		{put + "a value=x=y", "cmd=put_result rc=0 msg=success"},
		{put + "empty value=", "cmd=put_result rc=0 msg=success"},
		{get + "a", "cmd=get_result rc=-1 msg=key_a_not_found"}, // not before the barrier
		{"cmd=barrier_in", "cmd=barrier_out rc=0"},
		{get + "a", "cmd=get_result rc=0 msg=success value=x=y"},
		{get + "empty", "cmd=get_result rc=0 msg=success value="},
		{get + "PMI_process_mapping", "cmd=get_result rc=0 msg=success value=(vector,(0,1,1))"},
		{put + "PMI_mine value=1", "cmd=put_result rc=-1 msg=key_PMI_mine_is_reserved_for_the_launcher"},
		{put + strings.Repeat("k", 63) + " value=1", "cmd=put_result rc=0 msg=success"},
		{put + strings.Repeat("k", 64) + " value=1", "cmd=put_result rc=-1 msg=key_longer_than_63_bytes"},
		{put + "v value=" + strings.Repeat("v", 1023), "cmd=put_result rc=0 msg=success"},
		{put + "v value=" + strings.Repeat("v", 1024), "cmd=put_result rc=-1 msg=value_longer_than_1023_bytes"},
		{"cmd=put kvsname=other key=a value=1", "cmd=put_result rc=-1 msg=unknown_kvsname"},
		{"cmd=get key=a", "cmd=get_result rc=-1 msg=unknown_kvsname"},
		{"cmd=put kvsname=" + testKVS + " value=1", "cmd=put_result rc=-1 msg=missing_key"},
		{"cmd=frobnicate now", "cmd=error rc=-1 msg=unknown_command_frobnicate"},
		{"cmd=initack pmiid=0.x", "cmd=initack rc=-1 msg=already_identified"},
		{"cmd=get_appnum", "cmd=appnum rc=0 appnum=0"}, // still in step
		{"cmd=finalize", "cmd=finalize_ack rc=0"},
	} {
		if got := talk(t, c, r, step.send); got != step.want {
			t.Errorf("%.60q: got %q, want %q", step.send, got, step.want)
		}
	}
	if inited, finalized := s.joined(0); !inited || !finalized {
		t.Errorf("joined(0) = %v, %v; want true, true", inited, finalized)
	}
}

func TestServerMalformed(t *testing.T) {
	for _, line := range []string{"hello", "cmd=", " ", "=x", "cmd=put key=a key=b", "mcmd=spawn", strings.Repeat("a", maxRequest+10)} {
		_, _, conns := testServer(t, "")
		r := bufio.NewReader(conns[0])
		if got := talk(t, conns[0], r, line); !strings.HasPrefix(got, "cmd=error rc=-1 msg=") {
			t.Errorf("%.40q: got %q, want an error", line, got)
		}
		if _, err := r.ReadString('\n'); !errors.Is(err, io.EOF) {
			t.Errorf("%.40q: the connection stays open (%v)", line, err)
		}
	}
}

func TestServerAbort(t *testing.T) {
	for line, want := range map[string]string{
		// MPICH's libpmi: the message, spaces and all, ends the line.
		"cmd=abort exitcode=5 message=Fatal error in MPI_Init: other": `abort 0 5 "Fatal error in MPI_Init: other"`,
		"cmd=abort exitcode=6 message=x=1 x=2 message=3":              `abort 0 6 "x=1 x=2 message=3"`,
		"cmd=abort exitcode=-1":                                       `abort 0 -1 ""`,
		"cmd=abort":                                                   `abort 0 1 ""`,
		"cmd=abort exitcode=two":                                      `abort 0 1 ""`,
	} {
		_, rec, conns := testServer(t, "")
		if got := talk(t, conns[0], bufio.NewReader(conns[0]), line); got != "EOF" {
			t.Errorf("%q: got %q, want the connection closed", line, got)
		}
		if got := rec.seen(); len(got) != 1 || got[0] != want {
			t.Errorf("%q: events %q, want %q", line, got, want)
		}
	}
}

// TestServerBarrier: with the real client, puts are seen by every proc after
// the barrier and by none before; a barrier a proc that exited can never
// join ends with an error instead of a hang.
func TestServerBarrier(t *testing.T) {
	const n = 3
	s, rec, conns := testServer(t, "", "", "")
	clients := make([]*pmi.Client, n)
	for p := range clients {
		clients[p] = pmi.New(conns[p], p, n)
		if err := clients[p].Init(); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for round := range 3 {
		for p, c := range clients {
			if err := c.Put(fmt.Sprintf("r%d-p%d", round, p), fmt.Sprintf("value %d of %d", round, p)); err != nil {
				t.Fatal(err)
			}
			var pe *pmi.Error
			if _, err := c.Get(fmt.Sprintf("r%d-p%d", round, (p+1)%n)); !errors.As(err, &pe) {
				t.Fatalf("round %d: proc %d read a put before the barrier: %v", round, p, err)
			}
		}
		errs := make([]error, n)
		for p, c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[p] = c.Barrier()
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		for p, c := range clients {
			for q := range n {
				got, err := c.Get(fmt.Sprintf("r%d-p%d", round, q))
				if want := fmt.Sprintf("value %d of %d", round, q); got != want || err != nil {
					t.Fatalf("round %d: proc %d read %q, %v; want %q", round, p, got, err, want)
				}
			}
		}
	}

	// Proc 0 waits; then proc 1 exits: the wait can never end.
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := clients[0].Barrier(); err == nil {
			t.Error("proc 0 left a barrier proc 1 never joined")
		}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s.mu.Lock()
		waiting := len(s.waiting)
		s.mu.Unlock()
		if waiting == 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if got := s.exited(1); got != 0 {
		t.Errorf("exited(1) = %d, want 0: proc 0 waits", got)
	}
	// A later barrier fails at once.
	if err := clients[2].Barrier(); err == nil {
		t.Error("proc 2 entered a barrier after proc 1 exited")
	}
	if got := rec.seen(); len(got) != 1 || got[0] != "stranded 2 1" {
		t.Errorf("events %q, want [stranded 2 1]", got)
	}
	s.close() // releases proc 0
	wg.Wait()
}

// TestServerBarrierSurvive: in an errors-return job a barrier completes when
// every proc still alive has entered it, also when the last one missing exits.
func TestServerBarrierSurvive(t *testing.T) {
	const n = 3
	s, rec, conns := testServer(t, "", "", "")
	s.survive = true
	clients := make([]*pmi.Client, n)
	for p := range clients {
		clients[p] = pmi.New(conns[p], p, n)
		if err := clients[p].Init(); err != nil {
			t.Fatal(err)
		}
	}
	waitFor := func(k int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			s.mu.Lock()
			waiting := len(s.waiting)
			s.mu.Unlock()
			if waiting == k {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d procs in the barrier, want %d", waiting, k)
			}
			time.Sleep(time.Millisecond)
		}
	}
	barrier := func(procs ...int) chan error {
		done := make(chan error, len(procs))
		for _, p := range procs {
			go func() { done <- clients[p].Barrier() }()
		}
		return done
	}
	// Procs 0 and 2 wait for proc 1, which exits: they go on without it.
	done := barrier(0, 2)
	waitFor(2)
	if got := s.exited(1); got != -1 {
		t.Errorf("exited(1) = %d, want -1: the barrier goes on", got)
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	// Later barriers are of the two left: proc 0 waits for proc 2 alone.
	done = barrier(0)
	waitFor(1)
	select {
	case err := <-done:
		t.Fatalf("proc 0 left the barrier before proc 2 entered it: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	done2 := barrier(2)
	if err := errors.Join(<-done, <-done2); err != nil {
		t.Fatal(err)
	}
	if got := rec.seen(); len(got) != 0 {
		t.Errorf("events %q, want none", got)
	}
}

func TestServerIdentify(t *testing.T) {
	s, rec, _ := testServer(t, "", "secret1", "secret2")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.listen(ln)
	dial := func(first string) (net.Conn, *bufio.Reader, string) {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		r := bufio.NewReader(c)
		return c, r, talk(t, c, r, first)
	}
	for first, want := range map[string]string{
		"cmd=initack pmiid=1.wrong":    "unknown_pmiid",
		"cmd=initack pmiid=0.":         "unknown_pmiid", // proc 0 is local: no PMI_ID
		"cmd=initack pmiid=7.secret1":  "unknown_pmiid",
		"cmd=initack pmiid=secret1":    "unknown_pmiid",
		"cmd=get_maxes":                "identify_first_with_cmd=initack",
		"cmd=initack pmiid=2.secret2x": "unknown_pmiid",
	} {
		if _, _, got := dial(first); got != "cmd=initack rc=-1 msg="+want {
			t.Errorf("%q: got %q, want a refusal %s", first, got, want)
		}
	}
	c, r, got := dial("cmd=initack pmiid=1.secret1")
	if got != "cmd=initack rc=0" {
		t.Fatalf("the right PMI_ID: got %q", got)
	}
	for _, want := range []string{"cmd=set size=3", "cmd=set rank=1", "cmd=set debug=0"} {
		if l, _ := r.ReadString('\n'); strings.TrimSpace(l) != want {
			t.Errorf("got %q, want %q", l, want)
		}
	}
	if got := talk(t, c, r, "cmd=get_universe_size"); got != "cmd=universe_size rc=0 size=3" {
		t.Errorf("after identifying: %q", got)
	}
	if _, _, got := dial("cmd=initack pmiid=1.secret1"); got != "cmd=initack rc=-1 msg=pmiid_already_used" {
		t.Errorf("a used PMI_ID again: got %q", got)
	}
	if n := len(rec.seen()); n != 7 {
		t.Errorf("%d refusals reported, want 7: %q", n, rec.seen())
	}
}

// FuzzServer: whatever a proc sends, the server answers or hangs up, never
// panics, and its conversation ends when the connection does.
func FuzzServer(f *testing.F) {
	for _, seed := range []string{
		"cmd=init pmi_version=1 pmi_subversion=1\ncmd=get_maxes\ncmd=get_my_kvsname\n",
		"cmd=put kvsname=" + testKVS + " key=a value=b\ncmd=barrier_in\ncmd=get kvsname=" + testKVS + " key=a\n",
		"cmd=get kvsname=" + testKVS + " key=PMI_process_mapping\ncmd=finalize\n",
		"cmd=abort exitcode=3 message=bye now\n",
		"cmd=put key=a key=a\n",
		"cmd=barrier_in\ncmd=barrier_in\ncmd=barrier_in\n",
		"cmd=initack pmiid=0.x\n\x00\xff=\n",
		"mcmd=spawn\nnprocs=2\nendcmd\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		s := newServer(testKVS, "(vector,(0,1,1))", []string{""}, &recorder{})
		cli, srv := net.Pipe()
		s.attach(0, srv)
		go io.Copy(io.Discard, cli)
		cli.SetDeadline(time.Now().Add(5 * time.Second))
		cli.Write(in)
		cli.Close()
		select {
		case <-s.conversation(0):
		case <-time.After(5 * time.Second):
			t.Fatalf("the conversation did not end with its connection")
		}
		s.close()
	})
}
