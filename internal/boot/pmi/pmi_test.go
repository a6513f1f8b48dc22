package pmi

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// within fails the test if f does not return in time: every failure mode
// of the client must be an error, never a hang.
func within(t *testing.T, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("call did not return within 10s")
	}
}

func mustInit(t *testing.T, c *Client) {
	t.Helper()
	if err := c.Init(); err != nil {
		t.Fatalf("Init: %v", err)
	}
}

// tricky values: spaces, '=', newlines, NUL, invalid UTF-8, empty, and
// values that need several pieces at the small vallen of the fake job.
func trickyValues(rank int) map[string]string {
	long := make([]byte, 3000)
	for i := range long {
		long[i] = byte(i*7 + rank)
	}
	return map[string]string{
		"sp":    fmt.Sprintf("tcp 10.0.0.%d:4000 key=value a=b=c", rank),
		"nl":    "line1\nline2\r\n\x00end",
		"bin":   "\xff\xfe\x00\x01",
		"empty": "",
		"long":  string(long),
		"edge":  strings.Repeat("z", 21), // 28 base64 bytes: exactly fills two pieces at vallen 16
	}
}

func TestKVSExchange(t *testing.T) {
	const n = 3
	job := newFakeJob(n, 16, 16) // tiny limits: almost every value is split
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for rank := range n {
		c := job.client(t, rank)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- func() error {
				if err := c.Init(); err != nil {
					return err
				}
				if c.KVSName() != "kvs_fake_0" || c.Rank() != rank || c.Size() != n {
					return fmt.Errorf("rank %d: kvs %q rank %d size %d", rank, c.KVSName(), c.Rank(), c.Size())
				}
				if _, k, v := c.Limits(); k != 16 || v != 16 {
					return fmt.Errorf("limits %d %d", k, v)
				}
				for k, v := range trickyValues(rank) {
					if err := c.Put(k+strconv.Itoa(rank), v); err != nil {
						return fmt.Errorf("rank %d put %s: %w", rank, k, err)
					}
				}
				if err := c.Barrier(); err != nil {
					return err
				}
				for peer := range n {
					for k, want := range trickyValues(peer) {
						got, err := c.Get(k + strconv.Itoa(peer))
						if err != nil {
							return fmt.Errorf("rank %d get %s%d: %w", rank, k, peer, err)
						}
						if got != want {
							return fmt.Errorf("rank %d get %s%d: got %q, want %q", rank, k, peer, clip(got), clip(want))
						}
					}
				}
				blocks, err := c.ProcessMapping()
				if err != nil {
					return err
				}
				nodes, err := ExpandMapping(blocks, c.Size())
				if err != nil {
					return err
				}
				if fmt.Sprint(nodes) != "[0 0 0]" {
					return fmt.Errorf("nodes %v", nodes)
				}
				return c.Finalize()
			}()
		}()
	}
	within(t, wg.Wait)
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	// Every line the client sent is one command of space-free key=value
	// fields.
	for _, l := range job.received() {
		if _, err := parseReply(l); err != nil {
			t.Errorf("client sent a line that is not key=value fields: %q: %v", l, err)
		}
	}
}

func TestPiecesFitExactly(t *testing.T) {
	for room := 3; room < 40; room++ {
		for n := 0; n < 500; n++ {
			p := pieces(n, room)
			head := len(strconv.Itoa(p)) + 1
			capacity := room - head + (p-1)*room
			if capacity < n {
				t.Fatalf("pieces(%d,%d)=%d holds only %d", n, room, p, capacity)
			}
			if p > 1 && room-len(strconv.Itoa(p-1))-1+(p-2)*room >= n {
				t.Fatalf("pieces(%d,%d)=%d is not minimal", n, room, p)
			}
		}
	}
}

func TestWireFormatOfPut(t *testing.T) {
	job := newFakeJob(1, 64, 1024)
	c := job.client(t, 0)
	mustInit(t, c)
	if err := c.Put("addr", "a b=c"); err != nil {
		t.Fatal(err)
	}
	lines := job.received()
	want := "cmd=put kvsname=kvs_fake_0 key=addr value=1:YSBiPWM"
	if got := lines[len(lines)-1]; got != want {
		t.Fatalf("sent %q, want %q", got, want)
	}
	if lines[0] != "cmd=init pmi_version=1 pmi_subversion=1" {
		t.Fatalf("first line %q", lines[0])
	}
}

func TestKeyChecks(t *testing.T) {
	job := newFakeJob(1, 16, 16)
	c := job.client(t, 0)
	if err := c.Put("k", "v"); err == nil || !strings.Contains(err.Error(), "before Init") {
		t.Fatalf("Put before Init: %v", err)
	}
	mustInit(t, c)
	for _, key := range []string{"", "PMI_mine", "a b", "a=b", "tab\t", "nl\n", "\x7f", "é", strings.Repeat("k", 16)} {
		if err := c.Put(key, "v"); err == nil {
			t.Errorf("Put(%q) accepted", key)
		}
	}
	// 15 bytes fit a short value but not the "#N" suffix of a split one.
	key := strings.Repeat("k", 15)
	if err := c.Put(key, "v"); err != nil {
		t.Errorf("Put(15-byte key, short value): %v", err)
	}
	if err := c.Put(key, strings.Repeat("v", 100)); err == nil || !strings.Contains(err.Error(), "keylen_max") {
		t.Errorf("Put(15-byte key, split value): %v", err)
	}
	if _, err := c.Get("PMI_process_mapping"); err == nil {
		t.Error("Get of a reserved key accepted; GetRaw is the way")
	}
	if v, err := c.GetRaw("PMI_process_mapping"); err != nil || v != "(vector,(0,1,1))" {
		t.Errorf("GetRaw mapping: %q %v", v, err)
	}
}

func TestRefusal(t *testing.T) {
	job := newFakeJob(1, 64, 1024)
	c := job.client(t, 0)
	mustInit(t, c)
	_, err := c.Get("nobody")
	var pe *Error
	if !errors.As(err, &pe) || pe.RC != -1 || pe.Msg != "key_nobody_not_found" || pe.Cmd != "get" {
		t.Fatalf("Get missing key: %#v", err)
	}
	// A refusal leaves the conversation in step.
	if err := c.Put("x", "y"); err != nil {
		t.Fatalf("Put after refusal: %v", err)
	}
	if err := c.Finalize(); err != nil {
		t.Fatal(err)
	}
	if err := c.Barrier(); err == nil {
		t.Fatal("Barrier after Finalize succeeded")
	}
}

func TestRefusedInit(t *testing.T) {
	c := scripted(t, func(string) (string, bool) {
		return "cmd=response_to_init rc=3 msg=version_mismatch\n", false
	})
	var err error
	within(t, func() { err = c.Init() })
	var pe *Error
	if !errors.As(err, &pe) || pe.RC != 3 || !strings.Contains(err.Error(), "version_mismatch") {
		t.Fatalf("Init: %v", err)
	}
}

func TestRefusedPutAndBarrier(t *testing.T) {
	c := scripted(t, func(l string) (string, bool) {
		switch {
		case strings.HasPrefix(l, "cmd=put "):
			return "cmd=put_result rc=1 msg=kvs_full\n", false
		case l == "cmd=barrier_in":
			return "cmd=barrier_out rc=2 msg=nope\n", false
		}
		return healthy(l), false
	})
	mustInit(t, c)
	var pe *Error
	if err := c.Put("a", "b"); !errors.As(err, &pe) || pe.Msg != "kvs_full" || pe.Cmd != "put" {
		t.Fatalf("Put: %v", err)
	}
	if err := c.Barrier(); !errors.As(err, &pe) || pe.RC != 2 {
		t.Fatalf("Barrier: %v", err)
	}
}

func TestGarbageReplies(t *testing.T) {
	cases := []struct {
		name, cmd, reply, want string
	}{
		{"not key=value", "get", "hello world\n", "not key=value"},
		{"empty line", "get", "\n", "empty line"},
		{"wrong command", "get", "cmd=put_result rc=0\n", "expected cmd=get_result, got cmd=put_result"},
		{"no cmd first", "get", "rc=0 cmd=get_result value=1:YQ\n", "does not begin with cmd="},
		{"bad rc", "get", "cmd=get_result rc=zero value=1:YQ\n", "not an integer"},
		{"no value", "get", "cmd=get_result rc=0\n", "lacks field value="},
		{"dup field", "get", "cmd=get_result rc=0 value=a value=b\n", "repeats"},
		{"not ours", "get", "cmd=get_result rc=0 value=hello\n", "not written by Put"},
		{"bad base64", "get", "cmd=get_result rc=0 value=1:@@@\n", "base64"},
		{"huge count", "get", "cmd=get_result rc=0 value=99999999:YQ\n", "not written by Put"},
		{"maxes missing", "get_maxes", "cmd=maxes kvsname_max=256 keylen_max=64\n", "lacks field vallen_max="},
		{"maxes tiny", "get_maxes", "cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1\n", "below the usable minimum"},
		{"maxes text", "get_maxes", "cmd=maxes kvsname_max=256 keylen_max=big vallen_max=1024\n", "not an integer"},
		{"no kvsname", "get_my_kvsname", "cmd=my_kvsname\n", "lacks field kvsname="},
		{"init version", "init", "cmd=response_to_init rc=0 pmi_version=2\n", "pmi_version=2"},
		{"barrier", "barrier_in", "cmd=barrier_outt\n", "expected cmd=barrier_out"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := scripted(t, func(l string) (string, bool) {
				if strings.HasPrefix(l, "cmd="+tc.cmd+" ") || l == "cmd="+tc.cmd {
					return tc.reply, false
				}
				return healthy(l), false
			})
			var err error
			within(t, func() {
				err = c.Init()
				if err == nil && tc.cmd == "get" {
					_, err = c.Get("k")
				}
				if err == nil && tc.cmd == "barrier_in" {
					err = c.Barrier()
				}
			})
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("got %v, want an ErrProtocol", err)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "cmd="+tc.cmd) {
				t.Fatalf("error %q should name cmd=%s and say %q", err, tc.cmd, tc.want)
			}
		})
	}
}

func TestOutOfStepIsSticky(t *testing.T) {
	c := scripted(t, func(l string) (string, bool) {
		if strings.HasPrefix(l, "cmd=get ") {
			return "garbage\n", false
		}
		return healthy(l), false
	})
	mustInit(t, c)
	_, err1 := c.Get("k")
	err2 := c.Put("k", "v")
	if err1 == nil || !errors.Is(err2, ErrProtocol) {
		t.Fatalf("after garbage: %v then %v", err1, err2)
	}
}

func TestServerClosesMidCommand(t *testing.T) {
	for _, cmd := range []string{"init", "get_maxes", "put", "get", "barrier_in", "finalize"} {
		t.Run(cmd, func(t *testing.T) {
			c := scripted(t, func(l string) (string, bool) {
				if strings.HasPrefix(l, "cmd="+cmd+" ") || l == "cmd="+cmd {
					return "", true
				}
				return healthy(l), false
			})
			var err error
			within(t, func() {
				if err = c.Init(); err != nil {
					return
				}
				switch cmd {
				case "put":
					err = c.Put("k", "v")
				case "get":
					_, err = c.Get("k")
				case "barrier_in":
					err = c.Barrier()
				case "finalize":
					err = c.Finalize()
				}
			})
			if err == nil || !strings.Contains(err.Error(), "cmd="+cmd) {
				t.Fatalf("got %v, want an error naming cmd=%s", err, cmd)
			}
			within(t, func() { err = c.Barrier() })
			if err == nil {
				t.Fatal("command after a lost connection succeeded")
			}
		})
	}
}

func TestPartialLineThenClose(t *testing.T) {
	c := scripted(t, func(l string) (string, bool) {
		if l == "cmd=barrier_in" {
			return "cmd=barrier_o", false // no newline; then the script hangs up at the next read
		}
		return healthy(l), false
	})
	mustInit(t, c)
	done := make(chan error, 1)
	go func() { done <- c.Barrier() }()
	// The server half-answered and waits; closing the client side from
	// outside (as Abort does) must end the wait with an error.
	time.Sleep(50 * time.Millisecond)
	c.conn.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Barrier on a half line succeeded")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Barrier hung")
	}
}

func TestAbortWhileBarrierWaits(t *testing.T) {
	got := make(chan string, 1)
	c := scripted(t, func(l string) (string, bool) {
		switch {
		case l == "cmd=barrier_in":
			return "", false // never answered: the other procs died
		case strings.HasPrefix(l, "cmd=abort"):
			got <- l
			return "", true
		}
		return healthy(l), false
	})
	mustInit(t, c)
	done := make(chan error, 1)
	go func() { done <- c.Barrier() }()
	time.Sleep(50 * time.Millisecond)
	var err error
	within(t, func() { err = c.Abort(3, "rank 2 failed:\tbad input") })
	if err != nil {
		t.Fatal(err)
	}
	if l := <-got; l != "cmd=abort exitcode=3 message=rank 2 failed: bad input" {
		t.Fatalf("server saw %q", l)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Barrier succeeded after Abort")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Barrier still waiting after Abort")
	}
}

func TestConcurrentUse(t *testing.T) {
	job := newFakeJob(1, 64, 64)
	c := job.client(t, 0)
	mustInit(t, c)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				k := fmt.Sprintf("g%d-%d", g, i)
				v := strings.Repeat(k+" ", i*5)
				if err := c.Put(k, v); err != nil {
					t.Error(err)
					return
				}
				if got, err := c.Get(k); err != nil || got != v {
					t.Errorf("Get %s: %q %v", k, clip(got), err)
					return
				}
			}
		}()
	}
	within(t, wg.Wait)
}

func clearPMIEnv(t *testing.T) {
	for _, k := range []string{"PMI_FD", "PMI_PORT", "PMI_ID", "PMI_RANK", "PMI_SIZE"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
}

func TestFromEnvNoLauncher(t *testing.T) {
	clearPMIEnv(t)
	if _, err := FromEnv(); !errors.Is(err, ErrNoLauncher) {
		t.Fatalf("got %v, want ErrNoLauncher", err)
	}
}

func TestFromEnvBad(t *testing.T) {
	clearPMIEnv(t)
	t.Setenv("PMI_FD", "seven")
	if _, err := FromEnv(); err == nil || errors.Is(err, ErrNoLauncher) {
		t.Fatalf("PMI_FD=seven: %v", err)
	}
	t.Setenv("PMI_FD", "0")
	if _, err := FromEnv(); err == nil || !strings.Contains(err.Error(), "PMI_RANK") {
		t.Fatalf("PMI_FD without PMI_RANK: %v", err)
	}
}

func TestFromEnvFD(t *testing.T) {
	clearPMIEnv(t)
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Skipf("socketpair: %v", err)
	}
	srvFile := os.NewFile(uintptr(fds[1]), "server")
	srv, err := net.FileConn(srvFile)
	srvFile.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	job := newFakeJob(2, 64, 1024)
	go job.serve(srv)
	t.Setenv("PMI_FD", strconv.Itoa(fds[0]))
	t.Setenv("PMI_RANK", "1")
	t.Setenv("PMI_SIZE", "2")
	c, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if c.Rank() != 1 || c.Size() != 2 {
		t.Fatalf("rank %d size %d", c.Rank(), c.Size())
	}
	within(t, func() {
		mustInit(t, c)
		if err := c.Finalize(); err != nil {
			t.Error(err)
		}
	})
}

func TestFromEnvPort(t *testing.T) {
	clearPMIEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ident := make(chan string, 1)
	job := newFakeJob(4, 64, 1024)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		buf := make([]byte, 100)
		n, _ := conn.Read(buf)
		ident <- string(buf[:n])
		// Hydra's answer, order and all.
		conn.Write([]byte("cmd=initack\ncmd=set size=4\ncmd=set rank=2\ncmd=set debug=0\n"))
		job.serve(conn)
	}()
	t.Setenv("PMI_PORT", ln.Addr().String())
	t.Setenv("PMI_ID", "2")
	c, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if got := <-ident; got != "cmd=initack pmiid=2\n" {
		t.Fatalf("identified with %q", got)
	}
	if c.Rank() != 2 || c.Size() != 4 {
		t.Fatalf("rank %d size %d", c.Rank(), c.Size())
	}
	within(t, func() {
		mustInit(t, c)
		if err := c.Finalize(); err != nil {
			t.Error(err)
		}
	})
}

func TestHandshakeGarbage(t *testing.T) {
	for _, answer := range []string{
		"cmd=initack\ncmd=set size=4\ncmd=set rank=9\ncmd=set debug=0\n", // rank out of range
		"cmd=initack\ncmd=set colour=blue\n",
		"cmd=initack rc=1 msg=who_are_you\n",
		"cmd=nope\n",
		"cmd=initack\n", // then hangs up
	} {
		cli, srv := net.Pipe()
		go func() {
			buf := make([]byte, 100)
			srv.Read(buf)
			srv.Write([]byte(answer))
			srv.Close()
		}()
		c := New(cli, -1, 0)
		var err error
		within(t, func() { err = c.handshake("0") })
		if err == nil {
			t.Errorf("handshake accepted %q", answer)
		}
		cli.Close()
	}
}
