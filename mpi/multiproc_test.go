package mpi_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weft-mpi/weft/internal/launch"
	"github.com/weft-mpi/weft/internal/testnet"
	"github.com/weft-mpi/weft/internal/testout"
	"github.com/weft-mpi/weft/mpi"
)

// Jobs of several OS processes: the test binary, re-executed as a helper program,
// started by a launcher. Every point-to-point behaviour of the single-proc tests is
// checked across procs by the "suite" helper, which synchronizes with messages so
// that it tests point-to-point alone; collectives across procs have their own
// helper, "collsuite" (xcoll_test.go).

func init() {
	helpers["suite"] = suite
	helpers["survive"] = survive
	helpers["vanish"] = vanish
	helpers["die"] = func(c *mpi.Comm) error {
		// The last rank's proc exits abruptly while the others wait for it.
		if c.Rank() == c.Size()-1 {
			os.Exit(3)
		}
		_, err := mpi.Recv(c, []byte{0}, c.Size()-1, 0)
		return err
	}
}

// syncTag is the tag of the messages that stand in for a barrier between checks.
const syncTag = 32000

// msgSync returns once every rank of c has called it: all report to rank 0, which
// then releases them.
func msgSync(c *mpi.Comm) error {
	if c.Rank() == 0 {
		for range c.Size() - 1 {
			if _, err := mpi.Recv(c, []byte{}, mpi.AnySource, syncTag); err != nil {
				return err
			}
		}
		for r := 1; r < c.Size(); r++ {
			if err := mpi.Send(c, []byte{}, r, syncTag); err != nil {
				return err
			}
		}
		return nil
	}
	if err := mpi.Send(c, []byte{}, 0, syncTag); err != nil {
		return err
	}
	_, err := mpi.Recv(c, []byte{}, 0, syncTag)
	return err
}

// msgPattern fills a message that names its sender, receiver, size and sequence.
func msgPattern(from, to, size, seq int) []byte {
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(from*31 + to*17 + size + seq*7 + i)
	}
	return b
}

// suiteSizes cross the mailbox, the eager limits and the fragment sizes.
var suiteSizes = []int{0, 1, 8, 33, 1000, 16 << 10, 16<<10 + 1, 64 << 10, 64<<10 + 1, 300 << 10, 2 << 20}

// suite runs every check in turn on every rank; a failing check names itself.
func suite(c *mpi.Comm) error {
	checks := []struct {
		name string
		fn   func(*mpi.Comm) error
	}{
		{"all pairs, all sizes", checkAllPairs},
		{"order across protocols", checkOrder},
		{"any source", checkAnySource},
		{"probe", checkProbe},
		{"truncate", checkTruncate},
		{"synchronous", checkSsend},
		{"cancel", checkCancel},
		{"sendrecv", checkSendrecv},
		{"collectives across procs", checkAcross},
	}
	for _, ch := range checks {
		if err := msgSync(c); err != nil {
			return fmt.Errorf("sync before %s: %w", ch.name, err)
		}
		if err := ch.fn(c); err != nil {
			return fmt.Errorf("%s: %w", ch.name, err)
		}
	}
	if err := msgSync(c); err != nil {
		return err
	}
	fmt.Printf("rank %d of %d: suite passed\n", c.Rank(), c.Size())
	return nil
}

// checkAllPairs: every rank sends every size to every other rank with Isend and
// receives them with Irecv by exact source and tag.
func checkAllPairs(c *mpi.Comm) error {
	me, n := c.Rank(), c.Size()
	var reqs []*mpi.Request
	bufs := map[[2]int][]byte{}
	for peer := range n {
		if peer == me {
			continue
		}
		for i, size := range suiteSizes {
			r, err := mpi.Isend(c, msgPattern(me, peer, size, 0), peer, i)
			if err != nil {
				return err
			}
			b := make([]byte, size)
			bufs[[2]int{peer, i}] = b
			rr, err := mpi.Irecv(c, b, peer, i)
			if err != nil {
				return err
			}
			reqs = append(reqs, r, rr)
		}
	}
	if _, err := mpi.Waitall(reqs...); err != nil {
		return err
	}
	for k, b := range bufs {
		if want := msgPattern(k[0], me, suiteSizes[k[1]], 0); !bytes.Equal(b, want) {
			return fmt.Errorf("rank %d: %d bytes from %d differ", me, len(b), k[0])
		}
	}
	return nil
}

// checkOrder: each rank sends its right neighbour messages of one tag that
// alternate between eager and three-phase sizes and between send modes; they must
// match in the order sent.
func checkOrder(c *mpi.Comm) error {
	const count = 60
	me, n := c.Rank(), c.Size()
	right, left := (me+1)%n, (me+n-1)%n
	buf := make([]byte, 1<<20)
	if err := c.AttachBuffer(buf); err != nil {
		return err
	}
	sizeOf := func(i int) int { return []int{5, 100 << 10, 0, 70 << 10, 3000}[i%5] }
	recvErr := make(chan error, 1)
	go func() { // the receiving side, on another goroutine of this rank
		for i := range count {
			got := make([]byte, 200<<10)
			st, err := mpi.Recv(c, got, left, 5)
			if err != nil {
				recvErr <- err
				return
			}
			if n := mpi.GetCount[byte](st); !bytes.Equal(got[:n], msgPattern(left, me, sizeOf(i), i)) {
				recvErr <- fmt.Errorf("message %d from %d: %d bytes, not the %d-byte message %d", i, left, n, sizeOf(i), i)
				return
			}
		}
		recvErr <- nil
	}()
	var reqs []*mpi.Request
	for i := range count {
		msg := msgPattern(me, right, sizeOf(i), i)
		var err error
		switch i % 4 {
		case 0:
			err = mpi.Send(c, msg, right, 5)
		case 1:
			var r *mpi.Request
			r, err = mpi.Isend(c, msg, right, 5)
			reqs = append(reqs, r)
		case 2:
			err = mpi.Bsend(c, msg, right, 5)
		case 3:
			err = mpi.Ssend(c, msg, right, 5)
		}
		if err != nil {
			return fmt.Errorf("send %d: %w", i, err)
		}
	}
	if _, err := mpi.Waitall(reqs...); err != nil {
		return err
	}
	if err := <-recvErr; err != nil {
		return err
	}
	_, err := c.DetachBuffer()
	return err
}

// checkAnySource: rank 0 receives every other rank's messages with AnySource and
// AnyTag; each sender's arrive in the order it sent them.
func checkAnySource(c *mpi.Comm) error {
	const each = 20
	me, n := c.Rank(), c.Size()
	if me != 0 {
		for i := range each {
			size := []int{4, 90 << 10}[i%2]
			if err := mpi.Send(c, msgPattern(me, 0, size, i), 0, i); err != nil {
				return err
			}
		}
		// Stay until rank 0 has them all, so that no later message meets its AnyTag.
		_, err := mpi.Recv(c, []byte{}, 0, 90)
		return err
	}
	next := make([]int, n)
	buf := make([]byte, 100<<10)
	for range each * (n - 1) {
		st, err := mpi.Recv(c, buf, mpi.AnySource, mpi.AnyTag)
		if err != nil {
			return err
		}
		src, i := st.Source, next[st.Source]
		if st.Tag != i {
			return fmt.Errorf("from %d: tag %d, want %d (overtaken)", src, st.Tag, i)
		}
		size := []int{4, 90 << 10}[i%2]
		if !bytes.Equal(buf[:mpi.GetCount[byte](st)], msgPattern(src, 0, size, i)) {
			return fmt.Errorf("from %d: message %d corrupt", src, i)
		}
		next[src]++
	}
	for r := 1; r < n; r++ {
		if err := mpi.Send(c, []byte{}, r, 90); err != nil {
			return err
		}
	}
	return nil
}

// checkProbe: rank 0 probes rank 1's messages (an eager and a three-phase one) for
// their size, then receives them; Mprobe and Improbe take them for Mrecv.
func checkProbe(c *mpi.Comm) error {
	sizes := []int{10, 200 << 10, 1, 100 << 10}
	switch c.Rank() {
	case 1:
		for i, size := range sizes {
			if err := mpi.Send(c, msgPattern(1, 0, size, i), 0, 40+i); err != nil {
				return err
			}
		}
	case 0:
		for i, size := range sizes {
			var st mpi.Status
			var err error
			var m *mpi.Message
			switch i {
			case 0:
				st, err = mpi.Probe(c, 1, 40)
			case 1:
				for ok := false; !ok && err == nil; {
					st, ok, err = mpi.Iprobe(c, mpi.AnySource, 41)
				}
			case 2:
				m, st, err = mpi.Mprobe(c, 1, mpi.AnyTag)
			case 3:
				for ok := false; !ok && err == nil; {
					m, st, ok, err = mpi.Improbe(c, 1, 43)
				}
			}
			if err != nil {
				return err
			}
			if got := mpi.GetCount[byte](st); got != size || st.Source != 1 || st.Tag != 40+i {
				return fmt.Errorf("probe %d: %d bytes from %d tag %d, want %d from 1 tag %d", i, got, st.Source, st.Tag, size, 40+i)
			}
			buf := make([]byte, size)
			if m != nil {
				st, err = mpi.Mrecv(m, buf)
			} else {
				st, err = mpi.Recv(c, buf, 1, 40+i)
			}
			if err != nil {
				return err
			}
			if !bytes.Equal(buf, msgPattern(1, 0, size, i)) {
				return fmt.Errorf("message %d after probe corrupt", i)
			}
		}
	}
	return nil
}

// checkTruncate: messages longer than the receive buffer give ErrTruncate with the
// bytes that fit, for both protocols.
func checkTruncate(c *mpi.Comm) error {
	sizes := []int{100, 300 << 10}
	switch c.Rank() {
	case 1:
		for i, size := range sizes {
			if err := mpi.Send(c, msgPattern(1, 0, size, i), 0, 50+i); err != nil {
				return err
			}
		}
	case 0:
		for i, size := range sizes {
			buf := make([]byte, 10)
			st, err := mpi.Recv(c, buf, 1, 50+i)
			if !errors.Is(err, mpi.ErrTruncate) {
				return fmt.Errorf("a %d-byte message into 10 bytes: %v, want ErrTruncate", size, err)
			}
			if mpi.GetCount[byte](st) != 10 || !bytes.Equal(buf, msgPattern(1, 0, size, i)[:10]) {
				return fmt.Errorf("truncated %d-byte message: got %d bytes %v", size, mpi.GetCount[byte](st), buf)
			}
		}
	}
	return nil
}

// checkSsend: a synchronous send to another proc completes only once its receive
// has matched: rank 1's Issend stays incomplete until rank 0, told so, posts it.
func checkSsend(c *mpi.Comm) error {
	switch c.Rank() {
	case 1:
		for _, size := range []int{8, 200 << 10} {
			r, err := mpi.Issend(c, msgPattern(1, 0, size, 0), 0, 60)
			if err != nil {
				return err
			}
			time.Sleep(20 * time.Millisecond) // time for a wrong early completion to show
			if _, done, err := r.Test(); err != nil || done {
				return fmt.Errorf("a %d-byte Issend completed (%v) before its receive was posted", size, err)
			}
			if err := mpi.Send(c, []byte{1}, 0, 61); err != nil {
				return err
			}
			if _, err := r.Wait(); err != nil {
				return err
			}
		}
	case 0:
		for _, size := range []int{8, 200 << 10} {
			if _, err := mpi.Recv(c, []byte{0}, 1, 61); err != nil {
				return err
			}
			buf := make([]byte, size)
			if _, err := mpi.Recv(c, buf, 1, 60); err != nil {
				return err
			}
			if !bytes.Equal(buf, msgPattern(1, 0, size, 0)) {
				return fmt.Errorf("Ssend of %d bytes corrupt", size)
			}
		}
	}
	return nil
}

// checkCancel: an unmatched receive from another proc, and unmatched sends to
// another proc (eager and three-phase) are cancelled; nothing of them arrives.
func checkCancel(c *mpi.Comm) error {
	switch c.Rank() {
	case 0:
		r, err := mpi.Irecv(c, make([]byte, 8), 1, 70)
		if err != nil {
			return err
		}
		if err := r.Cancel(); err != nil {
			return err
		}
		if st, err := r.Wait(); err != nil || !st.Cancelled {
			return fmt.Errorf("cancelled receive: %+v %v", st, err)
		}
	case 1:
		for i, size := range []int{16, 300 << 10} {
			r, err := mpi.Isend(c, msgPattern(1, 0, size, i), 0, 71+i)
			if err != nil {
				return err
			}
			if err := r.Cancel(); err != nil {
				return err
			}
			if st, err := r.Wait(); err != nil || !st.Cancelled {
				return fmt.Errorf("cancel of an unreceived %d-byte send: %+v %v, want cancelled", size, st, err)
			}
		}
	}
	if err := msgSync(c); err != nil {
		return err
	}
	if c.Rank() == 0 {
		for tag := 71; tag <= 72; tag++ {
			if _, ok, err := mpi.Iprobe(c, 1, tag); err != nil || ok {
				return fmt.Errorf("a cancelled send with tag %d can still be received (%v)", tag, err)
			}
		}
	}
	return nil
}

// checkSendrecv: a ring exchange of every size with Sendrecv and SendrecvReplace.
func checkSendrecv(c *mpi.Comm) error {
	me, n := c.Rank(), c.Size()
	right, left := (me+1)%n, (me+n-1)%n
	for i, size := range suiteSizes {
		got := make([]byte, size)
		if _, err := mpi.Sendrecv(c, msgPattern(me, right, size, i), right, 80, got, left, 80); err != nil {
			return err
		}
		if !bytes.Equal(got, msgPattern(left, me, size, i)) {
			return fmt.Errorf("Sendrecv of %d bytes from %d corrupt", size, left)
		}
		buf := msgPattern(me, right, size, i+1)
		if _, err := mpi.SendrecvReplace(c, buf, right, 81, left, 81); err != nil {
			return err
		}
		if !bytes.Equal(buf, msgPattern(left, me, size, i+1)) {
			return fmt.Errorf("SendrecvReplace of %d bytes from %d corrupt", size, left)
		}
	}
	return nil
}

// checkAcross: a few collectives across procs, beside the point-to-point checks;
// the collective suite (xcoll_test.go) checks them all fully.
func checkAcross(c *mpi.Comm) error {
	me, n := c.Rank(), c.Size()
	got := make([]int32, 1)
	if err := mpi.Scatter(c, slices.Repeat([]int32{7}, n), got, 0); err != nil || got[0] != 7 {
		return fmt.Errorf("Scatter across procs: %v, got %d", err, got[0])
	}
	all := make([]int32, n)
	if err := mpi.Alltoall(c, slices.Repeat([]int32{int32(me)}, n), all); err != nil {
		return fmt.Errorf("Alltoall across procs: %v", err)
	}
	for j, v := range all {
		if v != int32(j) {
			return fmt.Errorf("Alltoall across procs: got %v", all)
		}
	}
	if err := mpi.Scan(c, []int32{1}, got, mpi.Sum); err != nil || got[0] != int32(me+1) {
		return fmt.Errorf("Scan across procs: %v, got %d", err, got[0])
	}
	return nil
}

// hydra returns the command line that starts procs copies of the test binary under
// MPICH's mpiexec, or skips the test when it is not installed.
func hydra(t *testing.T, procs int) []string {
	t.Helper()
	path, err := exec.LookPath("mpiexec.mpich")
	if err != nil {
		t.Skip("mpiexec.mpich is not installed (Debian package mpich; .ci/run installs it)")
	}
	return []string{path, "-n", fmt.Sprint(procs), os.Args[0]}
}

// launched runs the helper program name as a job of launch.Config cfg (weft run,
// in this process), with env added as runHelper does. It returns the job's error
// (a *launch.Failure when a proc failed) and the procs' output.
func launched(t *testing.T, cfg launch.Config, name string, env []string) (err error, stdout, stderr string) {
	t.Helper()
	cfg = helperJob(cfg, name, env)
	var out, errOut bytes.Buffer
	signals := make(chan os.Signal, 2)
	cfg.Stdout, cfg.Stderr, cfg.Signals = &out, &errOut, signals
	done := make(chan error, 1)
	go func() { done <- launch.Run(cfg) }()
	select {
	case err = <-done:
	case <-time.After(jobTimeout):
		// A SIGQUIT first: the procs of a hung job print their goroutines. The
		// output is read once the job is gone, when nothing writes it any more.
		signals <- syscall.SIGQUIT
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			signals <- syscall.SIGKILL // a second signal kills the job
			<-done
		}
		t.Fatalf("job %s did not end within %v; stdout:\n%s\nstderr:\n%s", name, jobTimeout, out.String(), errOut.String())
	}
	return err, out.String(), errOut.String()
}

// helperJob is cfg made to run the helper program name, with env added to the
// test's environment as runHelper does.
func helperJob(cfg launch.Config, name string, env []string) launch.Config {
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WEFT_") && !strings.HasPrefix(kv, "GORACE=") && !strings.HasPrefix(kv, "PMI_") {
			cfg.Env = append(cfg.Env, kv)
		}
	}
	gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	cfg.Env = append(append(cfg.Env, helperEnv+"="+name, "GORACE="+gorace), env...)
	cfg.Program = os.Args[0]
	return cfg
}

// checkSuite checks that every one of n ranks reported the suite passed.
func checkSuite(t *testing.T, n int, out, errOut string) {
	t.Helper()
	var want []string
	for r := range n {
		want = append(want, fmt.Sprintf("rank %d of %d: suite passed", r, n))
	}
	got := strings.Split(strings.TrimSpace(out), "\n")
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("output:\n%s\nwant:\n%s\nstderr:\n%s", out, strings.Join(want, "\n"), errOut)
	}
}

// TestWeftRunSuite runs the suite as jobs of weft run: one or several ranks per
// proc, and uneven layouts (the last proc has fewer ranks).
func TestWeftRunSuite(t *testing.T) {
	weftRunSuite(t, "suite", []struct{ ranks, perProc int }{{2, 1}, {3, 1}, {5, 3}, {7, 2}})
}

// TestWeftRunSuiteTCP runs the suite with this host's procs on TCP over loopback,
// as procs of different hosts talk, instead of Unix domain sockets.
func TestWeftRunSuiteTCP(t *testing.T) {
	err, out, errOut := launched(t, launch.Config{Ranks: 5, PerProc: 3}, "suite", []string{"WEFT_NET_UNIX=false"})
	if err != nil {
		t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	checkSuite(t, 5, out, errOut)
}

// TestNetCongestion: procs over TCP take WEFT_NET_CONGESTION; a name the kernel
// refuses leaves the links working, and each proc says so once.
func TestNetCongestion(t *testing.T) {
	for _, tc := range []struct {
		cc       string
		refusals int
	}{{"reno", 0}, {"no-such-cc", 2}} {
		t.Run(tc.cc, func(t *testing.T) {
			err, out, errOut := launched(t, launch.Config{Ranks: 2, PerProc: 1}, "ring", []string{"WEFT_NET_UNIX=false", "WEFT_NET_CONGESTION=" + tc.cc})
			if err != nil {
				t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
			}
			if n := strings.Count(out, "ring passed"); n != 2 {
				t.Errorf("%d ranks passed the ring, want 2:\n%s", n, out)
			}
			if n := strings.Count(errOut, `TCP congestion control "no-such-cc" refused`); n != tc.refusals {
				t.Errorf("%d refusals on stderr, want %d:\n%s", n, tc.refusals, errOut)
			}
		})
	}
}

// TestWeftRunSuiteSocket runs the suite with this host's procs on Unix domain
// sockets that carry the bytes themselves, not shared-memory rings.
func TestWeftRunSuiteSocket(t *testing.T) {
	err, out, errOut := launched(t, launch.Config{Ranks: 5, PerProc: 2}, "suite", []string{"WEFT_NET_SHM=false"})
	if err != nil {
		t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	checkSuite(t, 5, out, errOut)
}

// weftRunSuite runs the helper program name, which prints "suite passed" on every
// rank, as jobs of weft run of each layout: ranks, and ranks per proc.
func weftRunSuite(t *testing.T, name string, layouts []struct{ ranks, perProc int }) {
	for _, tt := range layouts {
		t.Run(fmt.Sprintf("n%d-per%d", tt.ranks, tt.perProc), func(t *testing.T) {
			err, out, errOut := launched(t, launch.Config{Ranks: tt.ranks, PerProc: tt.perProc}, name, nil)
			if err != nil {
				t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
			}
			checkSuite(t, tt.ranks, out, errOut)
		})
	}
}

// TestWeftRunHosts runs the suite on three hosts, network namespaces joined by a
// bridge, started through `ip netns exec`: procs on different hosts reach each
// other only through their namespaces' addresses.
func TestWeftRunHosts(t *testing.T) { weftRunHosts(t, "suite") }

// TestWeftRunHostsColl runs the collective suite on the same three hosts: the
// world's leaders meet on the collective channel, the procs of a communicator
// split within a host in its shared segment (host mode).
func TestWeftRunHostsColl(t *testing.T) { weftRunHosts(t, "collsuitehosts") }

// weftRunHosts runs the helper program name as 9 ranks, 2 a proc, on three
// hosts of 2 procs each at most.
func weftRunHosts(t *testing.T, name string) {
	nw := testnet.New(t, 3)
	var hosts []launch.Host
	for _, h := range nw.Hosts {
		hosts = append(hosts, launch.Host{Name: h.NS, Slots: 2})
	}
	cfg := launch.Config{Ranks: 9, PerProc: 2, Hosts: hosts, Rsh: "ip netns exec {host}", LauncherAddr: nw.Addr}
	err, out, errOut := launched(t, cfg, name, nil)
	if err != nil {
		t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	checkSuite(t, 9, out, errOut)
}

// TestWeftRunDeath: a proc that dies ends the job within seconds, and weft run
// names it; no proc is left waiting for it.
func TestWeftRunDeath(t *testing.T) { weftRunDeath(t, "die") }

// weftRunDeath runs the helper program name, whose proc 2 of 3 exits with status
// 3, and checks that the job ends at once naming it.
func weftRunDeath(t *testing.T, name string) {
	start := time.Now()
	err, out, errOut := launched(t, launch.Config{Ranks: 6, PerProc: 2}, name, nil)
	var f *launch.Failure
	if !errors.As(err, &f) || f.Proc != 2 || f.Code != 3 {
		t.Fatalf("job: %v, want proc 2 failing with status 3\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Errorf("the job took %v to end after a proc died", el)
	}
}

// survive is a job of 3 procs of 2 ranks in errors-return mode whose proc 2
// (ranks 4 and 5) dies while the others wait for it in every way (receives,
// wildcard receives, a probe, a synchronous send, a Barrier its ranks never
// join, in host mode): each survivor
// checks that what involved the dead proc failed with ErrProcFailed naming it,
// and that it still talks to the other survivors, in its proc and across.
func survive(c *mpi.Comm) error {
	const ready, late = 1, 2
	me := c.Rank()
	if c.Size() != 6 {
		return fmt.Errorf("survive wants 6 ranks, got %d", c.Size())
	}
	// A first collective: the procs' leaders of the world set up host mode, so
	// that the Barrier under way below waits in the shared segment.
	if err := c.Barrier(); err != nil {
		return err
	}
	switch me {
	case 4: // dies once every survivor waits
		if _, err := mpi.Recv(c, []byte{}, 0, ready); err != nil {
			return err
		}
		os.Exit(3)
	case 5: // dies with its proc, waiting for nothing that comes
		_, err := mpi.Recv(c, []byte{}, 0, late)
		return fmt.Errorf("rank 5 outlived its proc: %v", err)
	}
	lost := func(what string, err error) error {
		if !errors.Is(err, mpi.ErrProcFailed) || !strings.Contains(err.Error(), "lost proc 2") {
			return fmt.Errorf("%s: %v, want ErrProcFailed naming proc 2", what, err)
		}
		return nil
	}
	// What each survivor waits for when proc 2 dies.
	var pending func() error
	switch me {
	case 0:
		fromDead, err := mpi.Irecv(c, make([]int, 1), 5, late)
		if err != nil {
			return err
		}
		fromAny, err := mpi.Irecv(c, make([]int, 1), mpi.AnySource, late)
		if err != nil {
			return err
		}
		pending = func() error {
			_, err1 := fromDead.Wait()
			_, err2 := fromAny.Wait()
			return errors.Join(lost("Irecv from rank 5", err1), lost("Irecv from any source", err2))
		}
	case 1:
		probed, sent := make(chan error, 1), make(chan error, 1)
		go func() { _, err := mpi.Probe(c, 4, late); probed <- err }()
		go func() { sent <- mpi.Ssend(c, make([]byte, 1<<20), 5, late) }()
		pending = func() error {
			return errors.Join(lost("Probe of rank 4", <-probed), lost("Ssend to rank 5", <-sent))
		}
	case 2:
		done := make(chan error, 1)
		go func() { _, err := mpi.Recv(c, make([]byte, 1<<20), 4, late); done <- err }()
		pending = func() error { return lost("Recv from rank 4", <-done) }
	case 3:
		// An Irecv is posted when it returns, so this one waits before the death,
		// as a Probe in a goroutine may not (a loss fails the wildcards waiting).
		fromAny, err := mpi.Irecv(c, make([]byte, 8), mpi.AnySource, mpi.AnyTag)
		if err != nil {
			return err
		}
		pending = func() error { _, err := fromAny.Wait(); return lost("Irecv from any source and tag", err) }
	}
	// A collective under way, which the dead ranks never join.
	inBarrier := make(chan error, 1)
	go func() { inBarrier <- c.Barrier() }()
	// Rank 0 tells rank 4 once all four wait: proc 1 never sends to proc 2, so
	// it learns of the death only from a connection made for that.
	if me == 0 {
		for range 3 {
			if _, err := mpi.Recv(c, []byte{}, mpi.AnySource, ready); err != nil {
				return err
			}
		}
		if err := mpi.Send(c, []byte{}, 4, ready); err != nil {
			return err
		}
	} else if err := mpi.Send(c, []byte{}, 0, ready); err != nil {
		return err
	}
	if err := pending(); err != nil {
		return err
	}
	if err := lost("Barrier under way", <-inBarrier); err != nil {
		return err
	}
	// Once the loss is known, what involves the dead ranks fails at once.
	_, err := mpi.Recv(c, make([]byte, 8), 4, late)
	if err := lost("a later Recv from rank 4", err); err != nil {
		return err
	}
	if err := lost("a later Send to rank 5", mpi.Send(c, []byte("x"), 5, late)); err != nil {
		return err
	}
	if err := lost("a later Allreduce", mpi.Allreduce(c, []int{1}, make([]int, 1), mpi.Sum)); err != nil {
		return err
	}
	// The survivors still talk: a ring over ranks 0-3, across procs 0 and 1.
	next, prev := (me+1)%4, (me+3)%4
	for round := range 3 {
		got := make([]int, 1000)
		send := make([]int, 1000)
		for i := range send {
			send[i] = me*1000 + round*7 + i
		}
		if _, err := mpi.Sendrecv(c, send, next, 100+round, got, prev, 100+round); err != nil {
			return fmt.Errorf("ring among survivors, round %d: %w", round, err)
		}
		if got[999] != prev*1000+round*7+999 {
			return fmt.Errorf("ring among survivors, round %d: got %d from rank %d", round, got[999], prev)
		}
	}
	fmt.Printf("rank %d survived\n", me)
	return nil
}

// TestWeftRunErrorsReturn: under weft run --errors-return a proc that dies is
// reported, the others go on (survive checks what they see), and the job ends
// with the dead proc's status.
func TestWeftRunErrorsReturn(t *testing.T) {
	err, out, errOut := launched(t, launch.Config{Ranks: 6, PerProc: 2, ErrorsReturn: true}, "survive", nil)
	var f *launch.Failure
	if !errors.As(err, &f) || f.Proc != 2 || f.Code != 3 {
		t.Fatalf("job: %v, want proc 2 failing with status 3\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	got := strings.Split(strings.TrimSpace(out), "\n")
	slices.Sort(got)
	want := []string{"rank 0 survived", "rank 1 survived", "rank 2 survived", "rank 3 survived"}
	if !slices.Equal(got, want) {
		t.Errorf("stdout:\n%s\nwant:\n%s\nstderr:\n%s", out, strings.Join(want, "\n"), errOut)
	}
	if !strings.Contains(errOut, "the job goes on without it") {
		t.Errorf("weft run did not report the death: stderr:\n%s", errOut)
	}
}

// vanish is a job of 3 procs of one rank, each on a host of its own, in
// errors-return mode: once all are connected the test cuts host 2 off the
// network, silently, and ranks 0 and 1, waiting for rank 2, must learn of the
// loss (keep-alive) and go on together.
func vanish(c *mpi.Comm) error {
	me := c.Rank()
	if err := c.Barrier(); err != nil {
		return err
	}
	fmt.Printf("rank %d ready\n", me)
	if me == 2 {
		_, err := mpi.Recv(c, []byte{}, 0, 1) // never sent; fails once cut off
		fmt.Printf("rank 2 cut off: %v\n", err)
		return nil
	}
	start := time.Now()
	_, err := mpi.Recv(c, []byte{}, 2, 1)
	if !errors.Is(err, mpi.ErrProcFailed) || !strings.Contains(err.Error(), "lost proc 2") {
		return fmt.Errorf("Recv from the vanished rank: %v, want ErrProcFailed naming proc 2", err)
	}
	got := []int{-1}
	if _, err := mpi.Sendrecv(c, []int{me}, 1-me, 2, got, 1-me, 2); err != nil || got[0] != 1-me {
		return fmt.Errorf("exchange between survivors: %v, got %d", err, got[0])
	}
	fmt.Printf("rank %d survived after %v\n", me, time.Since(start).Round(time.Second))
	return nil
}

// TestWeftRunHostVanishes: a host that drops off the network without a word (its
// link goes down: no reset, no FIN) is found lost by the others' keep-alive
// probes, and in errors-return mode they go on without it. The job itself is
// then ended by a signal: its last PMI barrier would wait for the cut-off proc.
func TestWeftRunHostVanishes(t *testing.T) {
	nw := testnet.New(t, 3)
	var hosts []launch.Host
	for _, h := range nw.Hosts {
		hosts = append(hosts, launch.Host{Name: h.NS, Slots: 1})
	}
	out, errOut := testout.New(), testout.New()
	signals := make(chan os.Signal, 1)
	cfg := helperJob(launch.Config{Ranks: 3, Hosts: hosts, Rsh: "ip netns exec {host}", LauncherAddr: nw.Addr,
		ErrorsReturn: true, Signals: signals, Stdout: out, Stderr: errOut}, "vanish", nil)
	done := make(chan error, 1)
	go func() { done <- launch.Run(cfg) }()
	defer func() {
		signals <- syscall.SIGTERM
		select {
		case <-done:
		case <-time.After(jobTimeout):
			t.Errorf("the job did not end within %v of SIGTERM", jobTimeout)
		}
	}()
	if !awaitLines(out, "rank 0 ready", "rank 1 ready", "rank 2 ready") {
		t.Fatalf("the job did not start; stdout:\n%s\nstderr:\n%s", out, errOut)
	}
	if b, err := exec.Command("ip", "link", "set", nw.Hosts[2].Veth, "down").CombinedOutput(); err != nil {
		t.Fatalf("cutting host 2 off: %v: %s", err, b)
	}
	if !awaitLines(out, "rank 0 survived", "rank 1 survived") {
		t.Errorf("the survivors did not go on; stdout:\n%s\nstderr:\n%s", out, errOut)
	}
	t.Logf("stdout:\n%s", out)
}

// awaitLines waits, up to jobTimeout, until out holds every one of lines (each
// as the start of a line), and reports whether it did.
func awaitLines(out *testout.Buffer, lines ...string) bool {
	return out.Await(jobTimeout, func(text string) bool {
		return !slices.ContainsFunc(lines, func(l string) bool { return !strings.Contains("\n"+text, "\n"+l) })
	})
}

// TestWeftRunAbort: Abort in one rank ends the whole job with its code.
func TestWeftRunAbort(t *testing.T) {
	err, out, errOut := launched(t, launch.Config{Ranks: 4, PerProc: 2}, "abort", nil)
	if code := launch.ExitCode(err); code != 7 {
		t.Fatalf("job: %v (exit status %d), want 7\nstdout:\n%s\nstderr:\n%s", err, code, out, errOut)
	}
}

// TestSlurmSuite runs the suite under Slurm's srun --mpi=pmi2 when a Slurm is up
// (.ci/run starts one).
func TestSlurmSuite(t *testing.T) {
	srun, err := exec.LookPath("srun")
	if err != nil {
		t.Skip("srun is not on PATH; .ci/slurm-up.sh starts a single-host Slurm")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "sinfo", "--noheader", "--states=idle,mixed").Output(); err != nil || len(bytes.TrimSpace(out)) == 0 {
		t.Skipf("no idle Slurm node (sinfo: %v %q); .ci/slurm-up.sh starts one", err, out)
	}
	code, out, errOut := runCommand(t, []string{srun, "--mpi=pmi2", "-n", "2", os.Args[0]}, "suite", []string{"WEFT_PER_PROC=2"})
	if code != 0 {
		t.Fatalf("exit status %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	checkSuite(t, 4, out, errOut)
}

func TestMultiProcSuite(t *testing.T) {
	for _, tt := range []struct {
		procs, perProc int
	}{{2, 1}, {3, 1}, {4, 1}, {2, 3}, {3, 2}} {
		t.Run(fmt.Sprintf("%dx%d", tt.procs, tt.perProc), func(t *testing.T) {
			env := []string{fmt.Sprintf("WEFT_PER_PROC=%d", tt.perProc)}
			code, out, errOut := runCommand(t, hydra(t, tt.procs), "suite", env)
			if code != 0 {
				t.Fatalf("exit status %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
			}
			checkSuite(t, tt.procs*tt.perProc, out, errOut)
		})
	}
}

// TestMultiProcDeath: a proc that dies ends the job; the survivors do not hang.
func TestMultiProcDeath(t *testing.T) {
	start := time.Now()
	code, out, errOut := runCommand(t, hydra(t, 3), "die", []string{"WEFT_PER_PROC=2"})
	if code == 0 {
		t.Fatalf("a job whose proc died exited 0\nstdout:\n%s\nstderr:\n%s", out, errOut)
	}
	if el := time.Since(start); el > 20*time.Second {
		t.Errorf("the job took %v to end after a proc died", el)
	}
}
