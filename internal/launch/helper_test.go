//go:build unix

package launch

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weft-mpi/weft/internal/boot/pmi"
	"github.com/weft-mpi/weft/internal/topo"
)

// The test binary is also the program the tests launch: run with helperArg
// first, it is one proc of a job (helper), a PMI client through
// internal/boot/pmi, whose behaviour the words after helperArg select.
const helperArg = "weft-launch-helper"

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == helperArg {
		os.Exit(helper(os.Args[2:]))
	}
	dir, err := os.MkdirTemp("", "weft-launch-test")
	if err == nil {
		err = writeFakes(dir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// helperValue is what proc publishes: spaces, '=' and every byte value, long
// enough to need several PMI records.
func helperValue(proc int) string {
	tail := make([]byte, 2500)
	for i := range tail {
		tail[i] = byte(i + proc)
	}
	return fmt.Sprintf("proc %d key=value ", proc) + string(tail)
}

// helper is one proc. Its words:
//
//	die=P:C      proc P exits with status C after init, before the barrier
//	abort=P:C    proc P aborts the job with code C, then waits to be killed
//	abortwait=P:C  proc P aborts from another goroutine while it waits in a
//	             barrier that the others, who wait to be killed, never join
//	kill=P       proc P kills itself with SIGKILL after init
//	nofin=P      proc P exits 0 after the exchange without finalize
//	noinit=P     proc P exits 0 at once, never speaking PMI
//	term=C       on SIGTERM, print "got terminated" and exit C
//	ignoreterm   ignore SIGTERM
//	hang         print "ready" after the exchange and wait to be killed (after nofin)
//	lines=K      print K lines, each written in three pieces, on stdout and stderr
//	stdin        print what standard input holds
//	stranger     proc 0 tries to join the PMI_PORT server as strangers do
//	addrs        print this host's IPv4 addresses
//	pmiport      print PMI_PORT
//	env=A,B      print environment variables A and B
//	args ...     print every later word, quoted
//
// Every proc prints "pid=N" first and, after the exchange, a line
// "ok proc=... size=... ..." with what it learned; any unexpected answer is
// printed on stderr and makes it exit 1.
func helper(words []string) int {
	fmt.Printf("pid=%d\n", os.Getpid())
	opt := map[string]string{}
	var echo []string
	for i, w := range words {
		if w == "args" {
			echo = words[i+1:]
			break
		}
		k, v, _ := strings.Cut(w, "=")
		opt[k] = v
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "helper: "+format+"\n", a...)
		return 1
	}
	me, _ := strconv.Atoi(os.Getenv("PMI_RANK"))
	// target reports whether option k names this proc, and its code.
	target := func(k string) (int, bool) {
		v, ok := opt[k]
		if !ok {
			return 0, false
		}
		p, c, _ := strings.Cut(v, ":")
		code, _ := strconv.Atoi(c)
		return code, p == strconv.Itoa(me)
	}
	if _, ok := opt["ignoreterm"]; ok {
		signal.Ignore(syscall.SIGTERM)
	}
	if v, ok := opt["term"]; ok {
		code, _ := strconv.Atoi(v)
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGTERM)
		go func() {
			<-ch
			fmt.Printf("proc %d got terminated\n", me)
			os.Exit(code)
		}()
	}
	if _, ok := target("noinit"); ok {
		return 0
	}
	c, err := pmi.FromEnv()
	if err != nil {
		return fail("FromEnv: %v", err)
	}
	if err := c.Init(); err != nil {
		return fail("Init: %v", err)
	}
	if c.Rank() != me {
		return fail("PMI rank %d, PMI_RANK %d", c.Rank(), me)
	}
	mode := "fd"
	if os.Getenv("PMI_FD") == "" {
		mode = "port"
	}
	if code, ok := target("die"); ok {
		return code
	}
	if code, ok := target("abort"); ok {
		c.Abort(code, fmt.Sprintf("proc %d gives up", me))
		time.Sleep(time.Hour)
	}
	if code, ok := target("abortwait"); ok {
		go func() {
			time.Sleep(100 * time.Millisecond)
			c.Abort(code, fmt.Sprintf("proc %d gives up in a barrier", me))
		}()
		fmt.Fprintf(os.Stderr, "proc %d left the barrier: %v\n", me, c.Barrier())
		time.Sleep(time.Hour)
	} else if _, ok := opt["abortwait"]; ok {
		time.Sleep(time.Hour)
	}
	if _, ok := target("kill"); ok {
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	if _, ok := opt["stranger"]; ok && me == 0 {
		if err := strangers(c); err != nil {
			return fail("%v", err)
		}
		fmt.Println("strangers refused")
	}
	if err := c.Put(fmt.Sprintf("v%d", me), helperValue(me)); err != nil {
		return fail("Put: %v", err)
	}
	if err := c.Barrier(); err != nil {
		return fail("Barrier: %v", err)
	}
	for p := range c.Size() {
		got, err := c.Get(fmt.Sprintf("v%d", p))
		if err != nil || got != helperValue(p) {
			return fail("Get v%d: %d bytes, %v", p, len(got), err)
		}
	}
	var pe *pmi.Error
	if _, err := c.Get("nobody-put-this"); !errors.As(err, &pe) {
		return fail("Get of a missing key: %v, want a refusal", err)
	}
	blocks, err := c.ProcessMapping()
	if err != nil {
		return fail("ProcessMapping: %v", err)
	}
	nodes, err := pmi.ExpandMapping(blocks, c.Size())
	if err != nil {
		return fail("ExpandMapping: %v", err)
	}
	layout, err := topo.Parse(os.Getenv("WEFT_LAYOUT"))
	if err != nil || layout.Procs() != c.Size() {
		return fail("WEFT_LAYOUT %q: %v, want %d procs", os.Getenv("WEFT_LAYOUT"), err, c.Size())
	}
	first, n, _ := layout.ProcRanks(me)
	_, keylen, _ := c.Limits()
	fmt.Printf("ok proc=%d size=%d mode=%s layout=%s host=%s ranks=%d-%d nodes=%v job=%s key=%s kvs=%s keylen=%d rsh=%s\n",
		me, c.Size(), mode, os.Getenv("WEFT_LAYOUT"), os.Getenv("WEFT_HOST"), first, first+n-1,
		strings.ReplaceAll(fmt.Sprint(nodes), " ", ","), os.Getenv("WEFT_JOB"), os.Getenv("WEFT_KEY"),
		c.KVSName(), keylen, os.Getenv("FAKE_RSH_HOST"))
	if echo != nil {
		fmt.Printf("args=%q\n", echo)
	}
	if _, ok := opt["addrs"]; ok {
		addrs, _ := net.InterfaceAddrs()
		var v4 []string
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() {
				v4 = append(v4, ipn.IP.String())
			}
		}
		fmt.Printf("addrs=%s\n", strings.Join(v4, ","))
	}
	if v, ok := opt["env"]; ok {
		for _, k := range strings.Split(v, ",") {
			val, set := os.LookupEnv(k)
			fmt.Printf("env %s=%q %v\n", k, val, set)
		}
	}
	if _, ok := opt["pmiport"]; ok {
		fmt.Printf("PMI_PORT=%s\n", os.Getenv("PMI_PORT"))
	}
	if _, ok := opt["stdin"]; ok {
		in, _ := io.ReadAll(os.Stdin)
		fmt.Printf("proc %d stdin=%q\n", me, in)
	}
	if v, ok := opt["lines"]; ok {
		k, _ := strconv.Atoi(v)
		for i := range k {
			// Three writes per line: a launcher that forwarded reads as
			// they come would mix the pieces of different procs.
			for _, w := range []*os.File{os.Stdout, os.Stderr} {
				fmt.Fprintf(w, "line %d of proc %d ", i, me)
				fmt.Fprint(w, strings.Repeat("x", 50+i%7))
				fmt.Fprintf(w, " end %d\n", i)
			}
		}
		fmt.Print("no newline at the end")
	}
	if _, ok := target("nofin"); ok {
		return 0
	}
	if _, ok := opt["hang"]; ok {
		fmt.Println("ready")
		time.Sleep(time.Hour)
	}
	if err := c.Finalize(); err != nil {
		return fail("Finalize: %v", err)
	}
	return 0
}

// strangers tries what a stranger on the network could: it connects to
// PMI_PORT and asks for data without identifying, with a made-up PMI_ID, with
// this proc's own (already used) PMI_ID, with garbage, and with silence. Each
// must be answered by a refusal (rc=-1) and a closed connection, and nothing
// else.
func strangers(c *pmi.Client) error {
	addr, id := os.Getenv("PMI_PORT"), os.Getenv("PMI_ID")
	if addr == "" {
		return errors.New("stranger: no PMI_PORT")
	}
	for _, try := range []string{
		"cmd=get kvsname=" + c.KVSName() + " key=PMI_process_mapping\n",
		"cmd=initack pmiid=0.00000000000000000000000000000000\n",
		"cmd=initack pmiid=" + id + "\n",
		"hello there\n",
		"cmd=initack\n",
		"",
	} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			return fmt.Errorf("stranger: dial: %v", err)
		}
		conn.SetDeadline(time.Now().Add(15 * time.Second))
		if try != "" {
			io.WriteString(conn, try)
		} else {
			conn.(*net.TCPConn).CloseWrite()
		}
		var got []string
		sc := bufio.NewScanner(conn)
		for sc.Scan() {
			got = append(got, sc.Text())
		}
		conn.Close()
		if sc.Err() != nil || len(got) != 1 || !strings.HasPrefix(got[0], "cmd=initack rc=-1 msg=") {
			return fmt.Errorf("stranger %q: got %q (%v), want one refusal and the connection closed", try, got, sc.Err())
		}
	}
	return nil
}
