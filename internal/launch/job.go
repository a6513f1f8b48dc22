package launch

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	// settleTimeout bounds how long an exited proc's PMI conversation may
	// lag behind its exit status: a finalize or an abort written just before
	// exiting is read before the exit is judged.
	settleTimeout = 500 * time.Millisecond
	// outputTimeout bounds how long output may go on after the last proc
	// exited: whatever a proc left running in the background and still holds
	// its output pipe does not keep the launcher waiting.
	outputTimeout = time.Second
	// localhost is the host of procs run here when no hosts are given.
	localhost = "localhost"
)

// job is one run of Run.
type job struct {
	cfg     Config
	pl      *placement
	procs   []*proc
	out     *output
	srv     *server
	env     []string // the launcher's environment
	dir     string   // the working directory remote procs start in
	grace   time.Duration
	id, key string
	port    int // the PMI port to listen on for remote procs (0: any)
	exits   chan exitEvent

	fwd     sync.WaitGroup // output forwarders
	readers []*os.File     // their pipes, closed if they outlast outputTimeout

	mu        sync.Mutex
	failure   *Failure
	failed    chan struct{} // closed at the first failure that ends the job
	tearing   bool          // failed is closed
	signalled os.Signal     // the first signal forwarded, if any
}

// proc is one OS process of the job.
type proc struct {
	index    int
	host     string
	local    bool   // started here, PMI on an inherited socket
	pmiHost  string // remote: the launcher's address as this proc's host reaches it
	token    string // remote: the secret half of PMI_ID
	first, n int    // its ranks
	cmd      *exec.Cmd
	reaped   atomic.Bool // its process is waited for: no signal may reach its pid
}

type exitEvent struct {
	p   *proc
	err error
}

func newJob(cfg Config) (*job, error) {
	if cfg.Program == "" {
		return nil, errors.New("no program to run")
	}
	if cfg.PerProc == 0 {
		cfg.PerProc = 1
	}
	hosts := cfg.Hosts
	if len(hosts) == 0 {
		hosts = []Host{{Name: localhost, Slots: 1}}
	}
	pl, err := place(cfg.Ranks, cfg.PerProc, hosts)
	if err != nil {
		return nil, err
	}
	j := &job{
		cfg:    cfg,
		pl:     pl,
		out:    newOutput(cfg.Stdout, cfg.Stderr),
		env:    cfg.Env,
		grace:  cfg.Grace,
		id:     "weft-" + randomHex(8),
		key:    randomHex(32),
		failed: make(chan struct{}),
	}
	if j.env == nil {
		j.env = os.Environ()
	}
	if j.grace <= 0 {
		j.grace = DefaultGrace
	}
	self, _ := os.Hostname()
	fixedHost := ""
	if cfg.LauncherAddr != "" {
		if fixedHost, j.port, err = splitLauncherAddr(cfg.LauncherAddr); err != nil {
			return nil, err
		}
	}
	reach := map[string]string{} // host -> the launcher's address from there
	procs := pl.layout.Procs()
	tokens := make([]string, procs)
	j.procs = make([]*proc, procs)
	for i := range j.procs {
		h, _ := pl.layout.HostOf(i)
		first, n, _ := pl.layout.ProcRanks(i)
		p := &proc{index: i, host: pl.hosts[h], first: first, n: n}
		p.local = p.host == localhost || p.host == self
		if !p.local {
			addr, ok := reach[p.host]
			if !ok {
				addr = fixedHost
				if addr == "" {
					if addr, err = launcherAddr(p.host); err != nil {
						return nil, err
					}
				}
				reach[p.host] = addr
			}
			p.pmiHost = addr
			p.token = randomHex(16)
			tokens[i] = p.token
		}
		j.procs[i] = p
	}
	if len(reach) > 0 {
		if j.dir, err = os.Getwd(); err != nil {
			return nil, err
		}
	}
	j.exits = make(chan exitEvent, procs)
	j.srv = newServer(j.id, pl.mapping, tokens, j)
	j.srv.survive = cfg.ErrorsReturn
	return j, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) // never fails (crypto/rand crashes the program instead)
	return hex.EncodeToString(b)
}

// run starts every proc, serves the job until every proc has exited, and
// tears it down at the first failure.
func (j *job) run() error {
	// Local procs die with the thread that started them (procAttr): keep it.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if slices.ContainsFunc(j.procs, func(p *proc) bool { return !p.local }) {
		ln, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(j.port)))
		if err != nil {
			return fmt.Errorf("listening for the PMI connections of remote procs: %w", err)
		}
		j.port = ln.Addr().(*net.TCPAddr).Port
		j.srv.listen(ln)
	}
	live := 0
	for _, p := range j.procs {
		if j.failing() {
			break // no use starting procs only to stop them
		}
		if err := j.start(p); err != nil {
			j.fail(p, 127, "could not be started: "+err.Error())
			break
		}
		live++
		go j.wait(p)
	}
	failed, signals := j.failed, j.cfg.Signals
	var kill <-chan time.Time
	for live > 0 {
		select {
		case e := <-j.exits:
			live--
			j.judge(e)
		case <-failed:
			failed = nil
			j.signalAll(syscall.SIGTERM)
			if kill == nil {
				kill = time.After(j.grace)
			}
		case sig := <-signals:
			if !j.noteSignal(sig) {
				j.signalAll(syscall.SIGKILL)
				continue
			}
			s, ok := sig.(syscall.Signal)
			if !ok {
				s = syscall.SIGTERM
			}
			j.signalAll(s)
			if kill == nil {
				kill = time.After(j.grace)
			}
		case <-kill:
			j.signalAll(syscall.SIGKILL)
		}
	}
	j.srv.close()
	j.drainOutput()
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.failure != nil {
		return j.failure
	}
	return nil
}

// start starts one proc: here, with the PMI socket as fd 3, or on its host
// through the rsh command, with PMI_PORT and PMI_ID.
func (j *job) start(p *proc) (err error) {
	// theirs: the proc's ends, which it has its own copies of once started;
	// ours: the launcher's ends, kept only if it starts.
	var theirs, ours []io.Closer
	defer func() {
		if err != nil {
			closeAll(ours)
		}
		closeAll(theirs)
	}()
	var cmd *exec.Cmd
	var pmiConn net.Conn
	if p.local {
		var fd3 *os.File
		if pmiConn, fd3, err = socketpair(); err != nil {
			return err
		}
		ours, theirs = append(ours, pmiConn), append(theirs, fd3)
		cmd = exec.Command(j.cfg.Program, j.cfg.Args...)
		cmd.Env = append(withoutKeys(j.env, isPMIOrJobKey), j.procEnv(p)...)
		cmd.Env = append(cmd.Env, "PMI_FD=3")
		cmd.ExtraFiles = []*os.File{fd3}
	} else {
		env := append(remoteWeftEnv(j.env), j.procEnv(p)...)
		env = append(env, "PMI_PORT="+net.JoinHostPort(p.pmiHost, strconv.Itoa(j.port)),
			"PMI_ID="+strconv.Itoa(p.index)+"."+p.token)
		rsh := j.cfg.Rsh
		if rsh == "" {
			rsh = "ssh"
		}
		var argv []string
		if argv, err = RshArgv(rsh, p.host, remoteScript(j.dir, env, j.cfg.Program, j.cfg.Args)); err != nil {
			return err
		}
		cmd = exec.Command(argv[0], argv[1:]...)
		cmd.Env = j.env
	}
	cmd.SysProcAttr = procAttr()
	if p.index == 0 && j.cfg.Stdin != nil {
		var in *os.File
		var piped bool
		if in, piped, err = j.stdin(); err != nil {
			return err
		}
		if piped {
			theirs = append(theirs, in)
		}
		cmd.Stdin = in
	}
	var outs, ins [2]*os.File // the proc's stdout and stderr: our ends, its ends
	for i := range outs {
		if outs[i], ins[i], err = os.Pipe(); err != nil {
			return err
		}
		ours, theirs = append(ours, outs[i]), append(theirs, ins[i])
	}
	cmd.Stdout, cmd.Stderr = ins[0], ins[1]
	if err = cmd.Start(); err != nil {
		return err
	}
	p.cmd = cmd
	prefix := ""
	if j.cfg.TagOutput {
		prefix = tag(p.first, p.n)
	}
	for i, w := range []io.Writer{j.out.stdout, j.out.stderr} {
		r := outs[i]
		j.readers = append(j.readers, r)
		j.fwd.Add(1)
		go func() {
			defer j.fwd.Done()
			defer r.Close()
			j.out.forward(r, w, prefix)
		}()
	}
	if pmiConn != nil {
		j.srv.attach(p.index, pmiConn)
	}
	return nil
}

func closeAll(cs []io.Closer) {
	for _, c := range cs {
		c.Close()
	}
}

// stdin returns what proc 0 reads. A regular file, pipe or socket is passed
// on as it is. Anything else goes through a pipe the launcher fills (piped):
// a terminal above all, which a proc in a process group of its own could not
// read (SIGTTIN would stop it).
func (j *job) stdin() (in *os.File, piped bool, err error) {
	if f, ok := j.cfg.Stdin.(*os.File); ok {
		if st, err := f.Stat(); err == nil && (st.Mode().IsRegular() || st.Mode()&(os.ModeNamedPipe|os.ModeSocket) != 0) {
			return f, false, nil
		}
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, false, err
	}
	go func() {
		io.Copy(w, j.cfg.Stdin)
		w.Close()
	}()
	return r, true, nil
}

// procEnv is what every proc is told about its place in the job.
func (j *job) procEnv(p *proc) []string {
	env := []string{
		"PMI_RANK=" + strconv.Itoa(p.index),
		"PMI_SIZE=" + strconv.Itoa(len(j.procs)),
		"WEFT_LAYOUT=" + j.pl.layout.String(),
		"WEFT_JOB=" + j.id,
		"WEFT_KEY=" + j.key,
		"WEFT_HOST=" + p.host,
	}
	if j.cfg.ErrorsReturn {
		env = append(env, "WEFT_ERRORS=return")
	}
	return env
}

// isPMIOrJobKey: the variables a local proc must not inherit from the
// launcher's own environment (say, weft run itself run by mpiexec), because
// procEnv sets them or because they would name another launcher.
func isPMIOrJobKey(k string) bool {
	switch k {
	case "WEFT_LAYOUT", "WEFT_JOB", "WEFT_KEY", "WEFT_HOST":
		return true
	}
	return strings.HasPrefix(k, "PMI_")
}

// remoteWeftEnv is the part of the launcher's environment a remote proc gets:
// Weft's own tunables (WEFT_*), on which every proc of a job must agree.
// Nothing else: a remote host has its own PATH, HOME and the rest.
func remoteWeftEnv(env []string) []string {
	var out []string
	for _, kv := range withoutKeys(env, isPMIOrJobKey) {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "WEFT_") && strings.Trim(k, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") == "" {
			out = append(out, kv)
		}
	}
	return out
}

// withoutKeys returns env without the variables whose names drop says.
func withoutKeys(env []string, drop func(string) bool) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); !drop(k) {
			out = append(out, kv)
		}
	}
	return out
}

// wait reaps p, gives its PMI conversation a moment to catch up with its
// exit, and reports the exit. Whatever p left running in its process group
// is killed first, as Slurm ends a step's leftovers: an rsh wrapper that
// forks (or a proc's own helpers) must not outlive it.
func (j *job) wait(p *proc) {
	if awaitExit(p.cmd.Process.Pid) {
		signalGroup(p.cmd.Process, syscall.SIGKILL)
	}
	err := p.cmd.Wait()
	p.reaped.Store(true)
	select {
	case <-j.srv.conversation(p.index):
	case <-time.After(settleTimeout):
	}
	j.exits <- exitEvent{p, err}
}

// judge decides whether an exit fails the job.
func (j *job) judge(e exitEvent) {
	code, what := exitStatus(e.p.cmd.ProcessState, e.err)
	if code == 0 {
		// A proc that joined must say goodbye: exiting 0 without finalize
		// means it stopped halfway (a Weft proc always finalizes). One that
		// never joined (hostname, say) is not a PMI program at all.
		if inited, finalized := j.srv.joined(e.p.index); inited && !finalized {
			code, what = 1, "exited with status 0 without calling PMI finalize"
		}
	}
	switch {
	case code != 0 && j.cfg.ErrorsReturn:
		f := j.record(e.p, code, what)
		j.out.notef("%v; the job goes on without it (errors-return)", f)
	case code != 0:
		j.fail(e.p, code, what)
	}
	if waiter := j.srv.exited(e.p.index); waiter >= 0 {
		j.stranded(waiter, e.p.index)
	}
}

// exitStatus turns how a process ended into the job's exit status (128 plus
// the signal's number for a signal, as shells do) and words for the message.
func exitStatus(ps *os.ProcessState, err error) (int, string) {
	if ps == nil {
		return 1, "could not be waited for: " + err.Error()
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		s := ws.Signal()
		return 128 + int(s), fmt.Sprintf("was killed by signal %d (%v)", int(s), s)
	}
	if c := ps.ExitCode(); c != 0 {
		return c, "exited with status " + strconv.Itoa(c)
	}
	return 0, ""
}

// fail records the job's first failure and starts the teardown.
func (j *job) fail(p *proc, code int, what string) {
	j.record(p, code, what)
	j.mu.Lock()
	defer j.mu.Unlock()
	if !j.tearing {
		j.tearing = true
		close(j.failed)
	}
}

// record keeps the job's first failure, for its exit status, and returns the
// failure of p.
func (j *job) record(p *proc, code int, what string) *Failure {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.signalled != nil {
		what += fmt.Sprintf(", after weft run forwarded signal %v to the job", j.signalled)
	}
	f := &Failure{Proc: p.index, Host: p.host, Ranks: rankText(p.first, p.n), What: what, Code: code}
	if j.failure == nil {
		j.failure = f
	}
	return f
}

// failing reports whether the job has failed.
func (j *job) failing() bool {
	select {
	case <-j.failed:
		return true
	default:
		return false
	}
}

// noteSignal records a signal to forward; false if one came before.
func (j *job) noteSignal(sig os.Signal) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.signalled != nil {
		return false
	}
	j.signalled = sig
	return true
}

// signalAll sends sig to every proc still running, and whatever it started
// in its process group.
func (j *job) signalAll(sig syscall.Signal) {
	for _, p := range j.procs {
		if p.cmd != nil && !p.reaped.Load() {
			signalGroup(p.cmd.Process, sig)
		}
	}
}

// drainOutput waits for the output of every proc to end, or outputTimeout.
func (j *job) drainOutput() {
	done := make(chan struct{})
	go func() {
		j.fwd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(outputTimeout):
		for _, r := range j.readers {
			r.Close()
		}
		<-done
	}
}

// The server's events.

func (j *job) aborted(proc, code int, msg string) {
	what := "aborted the job with exit code " + strconv.Itoa(code)
	if msg != "" {
		what += ": " + msg
	}
	j.fail(j.procs[proc], code&0xff, what)
}

func (j *job) stranded(waiter, gone int) {
	j.fail(j.procs[gone], 1, fmt.Sprintf("exited without joining the PMI barrier that proc %d waits in", waiter))
}

func (j *job) refused(addr, why string) {
	j.out.notef("refused a PMI connection from %s: %s", addr, why)
}
