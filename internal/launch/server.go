package launch

import (
	"bufio"
	"bytes"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The limits the server announces in get_maxes: Hydra's, which every PMI-1
// client is written for. They count a C string's terminating NUL, so keys of
// up to 63 bytes and values of up to 1023 bytes are kept.
const (
	kvsnameMax = 256
	keylenMax  = 64
	vallenMax  = 1024
)

// maxRequest bounds one request line: a put of the longest key and value with
// the longest kvsname fits well within it.
const maxRequest = 4096

// identifyTimeout is how long a TCP connection has to identify itself with
// cmd=initack before it is dropped: a proc does so at once.
const identifyTimeout = 10 * time.Second

// events is what the server tells the job.
type events interface {
	// aborted: proc asked to end the job with exit status code.
	aborted(proc, code int, msg string)
	// stranded: proc waits in a barrier that proc gone, which has exited, can
	// never join.
	stranded(proc, gone int)
	// refused: a TCP connection from addr was turned away.
	refused(addr, why string)
}

// server is the PMI-1 server of one job: one key-value space, one barrier,
// one conversation per proc, over an inherited socket (local procs) or a TCP
// connection that proves which proc it is (remote procs).
type server struct {
	kvsname string
	mapping string   // PMI_process_mapping
	tokens  []string // the secret half of each proc's PMI_ID; "" if it has none
	ev      events
	// survive: a barrier completes when every proc still alive has entered it,
	// instead of failing the job when a proc exited before entering (errors-return
	// jobs go on without a dead proc).
	survive bool

	mu      sync.Mutex
	kv      map[string]string // what gets see: every put before the last barrier
	pending map[string]string // puts since the last barrier
	procs   []procState
	waiting []int         // procs in the current barrier
	release chan struct{} // closed when the current barrier completes
	closed  bool
	conns   map[net.Conn]struct{}
	ln      net.Listener
	wg      sync.WaitGroup
	done    chan struct{} // closed by close
}

type procState struct {
	claimed   bool          // its PMI_ID was used, or its socket given
	over      chan struct{} // closed when its conversation ends; nil before it starts
	inited    bool
	finalized bool
	exited    bool
}

func newServer(kvsname, mapping string, tokens []string, ev events) *server {
	return &server{
		kvsname: kvsname,
		mapping: mapping,
		tokens:  tokens,
		ev:      ev,
		kv:      map[string]string{},
		pending: map[string]string{},
		procs:   make([]procState, len(tokens)),
		release: make(chan struct{}),
		conns:   map[net.Conn]struct{}{},
		done:    make(chan struct{}),
	}
}

// listen accepts remote procs' connections on ln until close.
func (s *server) listen(ln net.Listener) {
	s.mu.Lock()
	s.ln = ln
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed
			}
			if !s.track(c) {
				return
			}
			s.wg.Add(1)
			go s.identify(c)
		}
	}()
}

// attach serves proc on c, a socket the proc inherited.
func (s *server) attach(proc int, c net.Conn) {
	if !s.track(c) {
		return
	}
	s.mu.Lock()
	s.procs[proc].claimed = true
	s.procs[proc].over = make(chan struct{})
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		s.serve(proc, c, bufio.NewReaderSize(c, maxRequest))
	}()
}

// track registers c so that close can end its conversation; false (and c
// closed) once the server is closed.
func (s *server) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		c.Close()
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *server) untrack(c net.Conn) {
	c.Close()
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// close ends every conversation, releases every barrier and waits for the
// server's goroutines.
func (s *server) close() {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.done)
		if s.ln != nil {
			s.ln.Close()
		}
		for c := range s.conns {
			c.Close()
		}
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// identify reads a TCP connection's first line, which must be
// "cmd=initack pmiid=<proc>.<token>" with a token nobody used before, and then
// serves that proc. Anything else is refused before any data of the job is
// sent.
func (s *server) identify(c net.Conn) {
	defer s.wg.Done()
	r := bufio.NewReaderSize(c, maxRequest)
	c.SetReadDeadline(time.Now().Add(identifyTimeout))
	proc, why := s.claim(r)
	if why != "" {
		s.ev.refused(c.RemoteAddr().String(), strings.ReplaceAll(why, "_", " "))
		c.SetWriteDeadline(time.Now().Add(time.Second))
		writeLine(c, "cmd=initack rc=-1 msg="+why)
		s.untrack(c)
		return
	}
	c.SetReadDeadline(time.Time{})
	reply := fmt.Sprintf("cmd=initack rc=0\ncmd=set size=%d\ncmd=set rank=%d\ncmd=set debug=0", len(s.tokens), proc)
	if writeLine(c, reply) != nil {
		s.untrack(c)
		s.conversationOver(proc)
		return
	}
	s.serve(proc, c, r)
}

// claim checks an identification line; why says, for the refusal's msg=,
// what was wrong.
func (s *server) claim(r *bufio.Reader) (proc int, why string) {
	line, err := readLine(r)
	if err != nil {
		return 0, "no_identification"
	}
	req, err := parseRequest(line)
	if err != nil || req.cmd != "initack" {
		return 0, "identify_first_with_cmd=initack"
	}
	idx, token, _ := strings.Cut(req.f["pmiid"], ".")
	proc, err = strconv.Atoi(idx)
	if err != nil || proc < 0 || proc >= len(s.tokens) || s.tokens[proc] == "" ||
		subtle.ConstantTimeCompare([]byte(token), []byte(s.tokens[proc])) != 1 {
		return 0, "unknown_pmiid"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.procs[proc].claimed {
		return 0, "pmiid_already_used"
	}
	s.procs[proc].claimed = true
	s.procs[proc].over = make(chan struct{})
	return proc, ""
}

func (s *server) conversationOver(proc int) {
	s.mu.Lock()
	close(s.procs[proc].over)
	s.mu.Unlock()
}

// conversation returns a channel closed when proc's conversation has ended,
// or at once if it never began.
func (s *server) conversation(proc int) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch := s.procs[proc].over; ch != nil {
		return ch
	}
	ch := make(chan struct{})
	close(ch)
	return ch
}

// conv is one proc's conversation.
type conv struct {
	proc int
	c    net.Conn
	wmu  sync.Mutex // one reply at a time: the barrier's comes from its own goroutine
	// inBarrier is set while the proc waits for barrier_out. The connection
	// is read all the while: a proc may abort from another goroutine while
	// one waits in a barrier (internal/boot/pmi's Abort does), and a proc
	// that dies there must be seen to.
	inBarrier atomic.Bool
	ended     chan struct{} // closed when the reading loop ends
	waiter    sync.WaitGroup
}

func (cv *conv) reply(line string) error {
	cv.wmu.Lock()
	defer cv.wmu.Unlock()
	return writeLine(cv.c, line)
}

// serve answers proc's commands, one reply per request, until the connection
// ends, the proc aborts, or a line cannot be understood (the conversation
// would be out of step: answer with an error and hang up).
func (s *server) serve(proc int, c net.Conn, r *bufio.Reader) {
	cv := &conv{proc: proc, c: c, ended: make(chan struct{})}
	defer s.conversationOver(proc)
	defer s.untrack(c)
	defer cv.waiter.Wait()
	defer close(cv.ended)
	for {
		line, err := readLine(r)
		if errors.Is(err, errLongLine) {
			cv.reply("cmd=error rc=-1 msg=line_longer_than_" + strconv.Itoa(maxRequest) + "_bytes")
			return
		}
		if err != nil {
			return
		}
		req, err := parseRequest(line)
		if err != nil {
			cv.reply("cmd=error rc=-1 msg=" + wireText(err.Error()))
			return
		}
		reply, hangup := s.handle(cv, req)
		if reply != "" && cv.reply(reply) != nil {
			return
		}
		if hangup {
			return
		}
	}
}

// handle answers one request; hangup ends the conversation after the reply.
func (s *server) handle(cv *conv, req request) (reply string, hangup bool) {
	proc := cv.proc
	if cv.inBarrier.Load() && req.cmd != "abort" {
		return "cmd=error rc=-1 msg=" + req.cmd + "_while_waiting_for_barrier_out", true
	}
	switch req.cmd {
	case "init":
		if req.f["pmi_version"] != "1" {
			return "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=-1 msg=only_pmi_version_1_is_served", false
		}
		s.mu.Lock()
		s.procs[proc].inited = true
		s.mu.Unlock()
		return "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0", false
	case "get_maxes":
		return fmt.Sprintf("cmd=maxes rc=0 kvsname_max=%d keylen_max=%d vallen_max=%d", kvsnameMax, keylenMax, vallenMax), false
	case "get_appnum":
		return "cmd=appnum rc=0 appnum=0", false
	case "get_my_kvsname":
		return "cmd=my_kvsname rc=0 kvsname=" + s.kvsname, false
	case "get_universe_size":
		return "cmd=universe_size rc=0 size=" + strconv.Itoa(len(s.tokens)), false
	case "put":
		return "cmd=put_result " + s.put(req), false
	case "get":
		return "cmd=get_result " + s.get(req), false
	case "barrier_in":
		release, ok := s.enterBarrier(proc)
		if !ok {
			return "cmd=barrier_out rc=-1 msg=a_proc_exited_and_can_never_join_the_barrier", true
		}
		cv.inBarrier.Store(true)
		cv.waiter.Add(1)
		go func() {
			defer cv.waiter.Done()
			select {
			case <-release:
				cv.inBarrier.Store(false) // before the reply: the next request may follow it at once
				cv.reply("cmd=barrier_out rc=0")
			case <-s.done:
			case <-cv.ended:
			}
		}()
		return "", false
	case "finalize":
		s.mu.Lock()
		s.procs[proc].finalized = true
		s.mu.Unlock()
		return "cmd=finalize_ack rc=0", false
	case "abort":
		code, err := strconv.Atoi(req.f["exitcode"])
		if err != nil {
			code = 1
		}
		s.ev.aborted(proc, code, req.f["message"])
		return "", true
	case "initack":
		return "cmd=initack rc=-1 msg=already_identified", false
	}
	return "cmd=error rc=-1 msg=unknown_command_" + req.cmd, false
}

// put stores a key for the next barrier to publish; it returns the reply's
// fields.
func (s *server) put(req request) string {
	key, val := req.f["key"], req.f["value"]
	if msg := s.checkKey(req, key); msg != "" {
		return msg
	}
	if strings.HasPrefix(key, "PMI_") {
		return "rc=-1 msg=key_" + key + "_is_reserved_for_the_launcher"
	}
	if len(val) > vallenMax-1 {
		return "rc=-1 msg=value_longer_than_" + strconv.Itoa(vallenMax-1) + "_bytes"
	}
	s.mu.Lock()
	s.pending[key] = val
	s.mu.Unlock()
	return "rc=0 msg=success"
}

// get answers from what the last barrier published, and PMI_process_mapping.
func (s *server) get(req request) string {
	key := req.f["key"]
	if msg := s.checkKey(req, key); msg != "" {
		return msg
	}
	if key == "PMI_process_mapping" {
		return "rc=0 msg=success value=" + s.mapping
	}
	s.mu.Lock()
	val, ok := s.kv[key]
	s.mu.Unlock()
	if !ok {
		return "rc=-1 msg=key_" + key + "_not_found"
	}
	return "rc=0 msg=success value=" + val
}

func (s *server) checkKey(req request, key string) string {
	switch {
	case req.f["kvsname"] != s.kvsname:
		return "rc=-1 msg=unknown_kvsname"
	case key == "":
		return "rc=-1 msg=missing_key"
	case len(key) > keylenMax-1:
		return "rc=-1 msg=key_longer_than_" + strconv.Itoa(keylenMax-1) + "_bytes"
	}
	return ""
}

// enterBarrier counts proc into the current barrier and returns the channel
// closed when every proc has entered it (with survive, every proc alive); the
// last to enter publishes every put made before it. ok is false when a proc has
// already exited and so can never enter it (never with survive).
func (s *server) enterBarrier(proc int) (release <-chan struct{}, ok bool) {
	s.mu.Lock()
	if gone := slices.IndexFunc(s.procs, func(st procState) bool { return st.exited }); gone >= 0 && !s.survive {
		s.mu.Unlock()
		s.ev.stranded(proc, gone)
		return nil, false
	}
	defer s.mu.Unlock()
	ch := s.release
	s.waiting = append(s.waiting, proc)
	s.completeBarrier()
	return ch, true
}

// completeBarrier releases the current barrier if every proc that must enter it
// has. Caller holds s.mu.
func (s *server) completeBarrier() {
	want := len(s.procs)
	if s.survive {
		want = 0
		for _, st := range s.procs {
			if !st.exited {
				want++
			}
		}
	}
	if len(s.waiting) == 0 || len(s.waiting) < want {
		return
	}
	for k, v := range s.pending {
		s.kv[k] = v
	}
	clear(s.pending)
	s.waiting = s.waiting[:0]
	close(s.release)
	s.release = make(chan struct{})
}

// exited records that proc's process is gone. It returns another proc that
// waits in the barrier, which can now never complete, or -1; with survive, the
// barrier goes on without proc instead.
func (s *server) exited(proc int) (stranded int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.procs[proc].exited = true
	s.waiting = slices.DeleteFunc(s.waiting, func(p int) bool { return p == proc })
	if s.survive {
		s.completeBarrier()
		return -1
	}
	if len(s.waiting) > 0 {
		return s.waiting[0]
	}
	return -1
}

// joined reports whether proc sent init, and whether it sent finalize.
func (s *server) joined(proc int) (inited, finalized bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.procs[proc].inited, s.procs[proc].finalized
}

// request is one PMI-1 command line: "cmd=NAME key=value ...".
type request struct {
	cmd string
	f   map[string]string
}

var errLongLine = errors.New("line too long")

// readLine reads one line, without its newline, of at most maxRequest bytes.
func readLine(r *bufio.Reader) (string, error) {
	line, err := r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return "", errLongLine
	}
	if err != nil {
		return "", err
	}
	return string(bytes.TrimRight(line, "\r\n")), nil
}

// parseRequest splits a line into fields at spaces and each field at its
// first '='. As in MPICH's parser, a word without '=' is allowed and ignored; a
// key may not repeat. A message= field is the rest of the line, spaces and
// '=' and all: MPICH's libpmi sends an abort's message as it is.
func parseRequest(line string) (request, error) {
	line, msg, hasMsg := strings.Cut(line, " message=")
	words := strings.Fields(line)
	if len(words) == 0 || !strings.HasPrefix(words[0], "cmd=") || len(words[0]) == len("cmd=") {
		return request{}, errors.New("expected cmd=NAME")
	}
	req := request{cmd: words[0][len("cmd="):], f: make(map[string]string, len(words))}
	for _, w := range words[1:] {
		k, v, ok := strings.Cut(w, "=")
		if !ok {
			continue
		}
		if _, dup := req.f[k]; dup || k == "" || k == "cmd" {
			return request{}, fmt.Errorf("field %q repeats or has no key", clip(w))
		}
		req.f[k] = v
	}
	if hasMsg {
		req.f["message"] = msg
	}
	return req, nil
}

// writeLine writes a reply and its newline in one write.
func writeLine(c net.Conn, line string) error {
	_, err := c.Write([]byte(line + "\n"))
	return err
}

// wireText makes s a msg= value: no white space.
func wireText(s string) string {
	return strings.Join(strings.Fields(s), "_")
}

// clip shortens s for a message.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
