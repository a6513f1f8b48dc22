// Package pmi is a client of the PMI-1 wire protocol, the text protocol that
// MPICH's Hydra (`mpiexec.mpich`) and Slurm (`srun --mpi=pmi2`) speak to the
// processes they start. Through it a Weft proc launched by one of them learns
// its rank and the job size, publishes and looks up addresses in the job's
// key-value space, waits for every proc at a barrier, and learns which ranks
// share a node.
//
// A Client serves one OS process (one PMI rank), however many Weft ranks the
// process hosts. Its methods may be called from several goroutines: one mutex
// serializes the commands, since the protocol is strictly one request, one
// reply on one connection.
//
// # Values
//
// PMI-1 lines are space-separated key=value fields with no quoting, and
// Hydra silently cuts a value at its first space and after vallen_max-1
// bytes (it still answers rc=0). So Put never sends the caller's bytes as
// they are: it encodes them with unpadded URL-safe base64 (RFC 4648 section
// 5, alphabet A-Z a-z 0-9 - _), so any bytes survive (spaces, '=', newlines,
// NULs, binary addresses). The encoded text is cut into pieces of at most
// vallen_max-1 bytes. The record under the key itself is "N:" followed by the
// first piece, where N is the number of pieces; pieces 1..N-1 live under
// "key#1" ... "key#<N-1>". Get reverses this. Keys written by the launcher
// (PMI_process_mapping) or by programs that do not speak this encoding are
// read verbatim with GetRaw.
package pmi

import (
	"bufio"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ErrNoLauncher is returned by FromEnv when the environment names no PMI
// server (neither PMI_FD nor PMI_PORT is set): the program was not started by
// a PMI launcher, and the caller should fall back to another way of booting
// (Weft's embedded default).
var ErrNoLauncher = errors.New("pmi: no PMI launcher in the environment (PMI_FD and PMI_PORT are unset)")

// Client is one process's conversation with its PMI server.
type Client struct {
	mu     sync.Mutex // serializes commands: one request, one reply
	wmu    sync.Mutex // serializes writes, so Abort can cut in while a command waits
	conn   io.ReadWriteCloser
	r      *bufio.Reader
	rank   int
	size   int
	broken error // sticky: set once the conversation is unusable

	inited  bool
	kvsname string
	// Limits from get_maxes. Hydra reports sizes of C buffers including the
	// terminating NUL, and silently truncates to one less, so the usable
	// lengths are keyMax-1 and valMax-1.
	kvsMax, keyMax, valMax int
}

// New returns a Client speaking PMI-1 on conn for the given rank of a job of
// size ranks. FromEnv is the usual constructor; New lets tests supply a fake
// server. Call Init before any other command.
func New(conn io.ReadWriteCloser, rank, size int) *Client {
	return &Client{conn: conn, r: bufio.NewReaderSize(conn, 4096), rank: rank, size: size}
}

// handshakeTimeout bounds the PMI_PORT identification exchange, which needs
// nothing but a live launcher; later commands (Barrier above all) wait as long
// as the job needs and end only when the launcher answers or the connection
// closes.
const handshakeTimeout = 30 * time.Second

// maxRequest bounds one command line we send, newline included: Slurm's pmi2
// plugin reads a PMI-1 request with a single 1024-byte read() and takes the
// rest of a longer line for a new, malformed request.
const maxRequest = 1024

// FromEnv connects to the PMI server named by the environment, as set up by
// the launcher:
//
//   - PMI_FD: an inherited connected socket (Hydra's default, and Slurm's).
//     Rank and size come from PMI_RANK and PMI_SIZE.
//   - PMI_PORT=host:port: FromEnv dials it and identifies itself with
//     "cmd=initack pmiid=$PMI_ID"; the server answers cmd=initack followed by
//     cmd=set size=, cmd=set rank= and cmd=set debug= lines (Hydra's
//     -pmi-port mode, which sets PMI_ID but neither PMI_RANK nor PMI_SIZE).
//
// With neither, it returns ErrNoLauncher. Call Init next.
func FromEnv() (*Client, error) {
	if fdText, ok := os.LookupEnv("PMI_FD"); ok && fdText != "" {
		return fromFD(fdText)
	}
	if addr, ok := os.LookupEnv("PMI_PORT"); ok && addr != "" {
		return fromPort(addr)
	}
	return nil, ErrNoLauncher
}

func envInt(name string) (int, error) {
	v, ok := os.LookupEnv(name)
	if !ok {
		return 0, fmt.Errorf("pmi: %s is not set", name)
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return 0, fmt.Errorf("pmi: %s=%q is not an integer", name, v)
	}
	return n, nil
}

func checkRankSize(rank, size int) error {
	if size <= 0 || rank < 0 || rank >= size {
		return fmt.Errorf("pmi: launcher gave rank %d of size %d", rank, size)
	}
	return nil
}

func fromFD(fdText string) (*Client, error) {
	fd, err := strconv.Atoi(strings.TrimSpace(fdText))
	if err != nil || fd < 0 {
		return nil, fmt.Errorf("pmi: PMI_FD=%q is not a file descriptor number", fdText)
	}
	rank, err := envInt("PMI_RANK")
	if err != nil {
		return nil, err
	}
	size, err := envInt("PMI_SIZE")
	if err != nil {
		return nil, err
	}
	if err := checkRankSize(rank, size); err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "PMI_FD")
	if f == nil {
		return nil, fmt.Errorf("pmi: PMI_FD=%d is not a valid file descriptor", fd)
	}
	// FileConn duplicates the descriptor (close-on-exec, non-blocking, under
	// the runtime's poller); the inherited one is no longer needed.
	conn, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("pmi: PMI_FD=%d is not a socket: %w", fd, err)
	}
	return New(conn, rank, size), nil
}

func fromPort(addr string) (*Client, error) {
	id, ok := os.LookupEnv("PMI_ID")
	if !ok {
		// MPICH's own client falls back the same way.
		id, ok = os.LookupEnv("PMI_RANK")
	}
	if !ok || id == "" {
		return nil, fmt.Errorf("pmi: PMI_PORT=%s is set but PMI_ID is not", addr)
	}
	if strings.ContainsAny(id, " =\t\r\n") {
		return nil, fmt.Errorf("pmi: PMI_ID=%q cannot be sent on the wire", id)
	}
	conn, err := net.DialTimeout("tcp", addr, handshakeTimeout)
	if err != nil {
		return nil, fmt.Errorf("pmi: connecting to PMI_PORT=%s: %w", addr, err)
	}
	conn.SetDeadline(time.Now().Add(handshakeTimeout))
	c := New(conn, -1, 0)
	if err := c.handshake(id); err != nil {
		conn.Close()
		return nil, err
	}
	conn.SetDeadline(time.Time{})
	return c, nil
}

// handshake performs the PMI_PORT identification and reads the rank and
// size the server assigns.
func (c *Client) handshake(id string) error {
	const sent = "initack"
	if err := c.send("cmd=initack pmiid=" + id); err != nil {
		return err
	}
	if _, err := c.recv(sent, "initack"); err != nil {
		return err
	}
	got := map[string]bool{}
	for len(got) < 3 {
		r, err := c.recv(sent, "set")
		if err != nil {
			return err
		}
		matched := false
		for _, k := range []string{"size", "rank", "debug"} {
			if _, ok := r.fields[k]; !ok {
				continue
			}
			n, err := r.needInt(sent, k)
			if err != nil {
				return err
			}
			switch k {
			case "size":
				c.size = n
			case "rank":
				c.rank = n
			}
			got[k] = true
			matched = true
		}
		if !matched {
			return fmt.Errorf("%w: reply to cmd=initack: expected cmd=set with size=, rank= or debug=", ErrProtocol)
		}
	}
	return checkRankSize(c.rank, c.size)
}

// Rank is this process's rank in the job, as the launcher numbered it.
func (c *Client) Rank() int { return c.rank }

// Size is the number of processes in the job.
func (c *Client) Size() int { return c.size }

// KVSName is the name of the job's key-value space (known after Init).
func (c *Client) KVSName() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.kvsname
}

// Limits returns the server's kvsname_max, keylen_max and vallen_max as it
// reported them (known after Init).
func (c *Client) Limits() (kvsnameMax, keylenMax, vallenMax int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.kvsMax, c.keyMax, c.valMax
}

// send writes one command line. Any failure makes the client unusable.
func (c *Client) send(line string) error {
	c.wmu.Lock()
	_, err := io.WriteString(c.conn, line+"\n")
	c.wmu.Unlock()
	if err != nil {
		cmd, _, _ := strings.Cut(strings.TrimPrefix(line, "cmd="), " ")
		c.broken = fmt.Errorf("pmi: sending cmd=%s: %w", cmd, err)
		return c.broken
	}
	return nil
}

// recv reads one reply line to command sent and checks that it is cmd=want
// with rc=0. Transport and protocol failures are sticky; a refusal (*Error)
// is not, since the conversation is still in step.
func (c *Client) recv(sent, want string) (reply, error) {
	line, err := c.readLine()
	if errors.Is(err, ErrProtocol) {
		c.broken = fmt.Errorf("%w: reply to cmd=%s (expected cmd=%s): %v", ErrProtocol, sent, want, err)
		return reply{}, c.broken
	}
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		c.broken = fmt.Errorf("pmi: waiting for the reply to cmd=%s (expected cmd=%s): connection lost: %w", sent, want, err)
		return reply{}, c.broken
	}
	r, err := parseReply(line)
	if err != nil {
		c.broken = fmt.Errorf("%w: reply to cmd=%s (expected cmd=%s): %v", ErrProtocol, sent, want, err)
		return reply{}, c.broken
	}
	if err := r.check(sent, want); err != nil {
		if errors.Is(err, ErrProtocol) {
			c.broken = err
		}
		return reply{}, err
	}
	return r, nil
}

// readLine reads up to '\n', refusing lines longer than maxLine.
func (c *Client) readLine() (string, error) {
	var b []byte
	for {
		chunk, err := c.r.ReadSlice('\n')
		b = append(b, chunk...)
		if len(b) > maxLine {
			return "", fmt.Errorf("%w: line longer than %d bytes", ErrProtocol, maxLine)
		}
		switch {
		case err == nil:
			return string(b), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return "", err
		}
	}
}

// call sends one command and reads its reply; c.mu must be held.
func (c *Client) call(sent, line, want string) (reply, error) {
	if c.broken != nil {
		return reply{}, c.broken
	}
	if err := c.send(line); err != nil {
		return reply{}, err
	}
	return c.recv(sent, want)
}

// ready reports why a command cannot be sent now; c.mu must be held.
func (c *Client) ready(cmd string) error {
	if c.broken != nil {
		return c.broken
	}
	if !c.inited {
		return fmt.Errorf("pmi: cmd=%s before Init", cmd)
	}
	return nil
}

// Init opens the conversation (init with PMI version 1.1) and fetches the
// limits (get_maxes) and the name of the job's key-value space
// (get_my_kvsname), which every later put and get must name.
func (c *Client) Init() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inited {
		return nil
	}
	r, err := c.call("init", "cmd=init pmi_version=1 pmi_subversion=1", "response_to_init")
	if err != nil {
		return err
	}
	if v, ok := r.fields["pmi_version"]; ok && v != "1" {
		c.broken = fmt.Errorf("%w: reply to cmd=init: server speaks pmi_version=%s, expected 1", ErrProtocol, clip(v))
		return c.broken
	}
	if r, err = c.call("get_maxes", "cmd=get_maxes", "maxes"); err != nil {
		return err
	}
	for _, f := range []struct {
		key string
		dst *int
		min int
	}{{"kvsname_max", &c.kvsMax, 2}, {"keylen_max", &c.keyMax, 8}, {"vallen_max", &c.valMax, 8}} {
		n, err := r.needInt("get_maxes", f.key)
		if err != nil {
			c.broken = err
			return err
		}
		if n < f.min {
			c.broken = fmt.Errorf("%w: reply to cmd=get_maxes: %s=%d is below the usable minimum %d", ErrProtocol, f.key, n, f.min)
			return c.broken
		}
		*f.dst = n
	}
	if r, err = c.call("get_my_kvsname", "cmd=get_my_kvsname", "my_kvsname"); err != nil {
		return err
	}
	name, err := r.need("get_my_kvsname", "kvsname")
	if err == nil && name == "" {
		err = fmt.Errorf("%w: reply to cmd=get_my_kvsname: empty kvsname", ErrProtocol)
	}
	if err != nil {
		c.broken = err
		return err
	}
	c.kvsname = name
	c.inited = true
	return nil
}

// checkKey refuses keys the wire cannot carry, keys in the launcher's
// reserved PMI_ namespace, and keys longer than the server keeps (it would
// silently truncate them and later gets would miss). longest is the length
// of the longest key the operation will actually send.
func (c *Client) checkKey(cmd, key string, longest int) error {
	if key == "" {
		return fmt.Errorf("pmi: %s: empty key", cmd)
	}
	for i := 0; i < len(key); i++ {
		if b := key[i]; b <= ' ' || b == '=' || b >= 0x7f {
			return fmt.Errorf("pmi: %s: key %q contains byte %#x, which the PMI wire format cannot carry", cmd, clip(key), b)
		}
	}
	if strings.HasPrefix(key, "PMI_") {
		return fmt.Errorf("pmi: %s: key %q: the PMI_ prefix is reserved for the launcher", cmd, clip(key))
	}
	if longest > c.keyMax-1 {
		return fmt.Errorf("pmi: %s: key %q needs %d bytes on the wire, the launcher keeps at most %d (keylen_max=%d)", cmd, clip(key), longest, c.keyMax-1, c.keyMax)
	}
	return nil
}

// partKey names piece i (i >= 1) of a split value.
func partKey(key string, i int) string { return key + "#" + strconv.Itoa(i) }

// pieces returns how many pieces an encoded value of n bytes needs when each
// record holds at most room bytes and the first also holds the "N:" header.
func pieces(n, room int) int {
	parts := 1
	for {
		first := room - len(strconv.Itoa(parts)) - 1
		need := 1
		if n > first {
			need = 1 + (n-first+room-1)/room
		}
		if need <= parts {
			return parts
		}
		parts = need
	}
}

// Put publishes value under key in the job's key-value space. Other
// processes see it after the next Barrier. Any bytes are allowed in value;
// long values are split into several records (see the package comment), so
// key must leave room for the "#N" suffix of the last piece.
func (c *Client) Put(key, value string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.ready("put"); err != nil {
		return err
	}
	enc := base64.RawURLEncoding.EncodeToString([]byte(value))
	room := c.valMax - 1
	// Slurm's pmi2 plugin reads a PMI-1 request with one read of at most
	// maxRequest bytes, whatever vallen_max says: the whole put line, with
	// the longest key the server accepts and the newline, must fit.
	if fit := maxRequest - len("cmd=put kvsname= key= value=\n") - len(c.kvsname) - (c.keyMax - 1); fit < room {
		if fit < 8 {
			return fmt.Errorf("pmi: put: kvsname %q and keylen_max=%d leave %d bytes of a %d-byte request for the value", clip(c.kvsname), c.keyMax, fit, maxRequest)
		}
		room = fit
	}
	n := pieces(len(enc), room)
	longest := len(key)
	if n > 1 {
		longest = len(partKey(key, n-1))
	}
	if err := c.checkKey("put", key, longest); err != nil {
		return err
	}
	head := strconv.Itoa(n) + ":"
	first := min(len(enc), room-len(head))
	recs := []string{head + enc[:first]}
	for rest := enc[first:]; len(rest) > 0; {
		k := min(len(rest), room)
		recs = append(recs, rest[:k])
		rest = rest[k:]
	}
	// Continuation pieces first, the head last: a reader that finds the
	// head finds every piece it announces.
	for i := len(recs) - 1; i >= 0; i-- {
		k := key
		if i > 0 {
			k = partKey(key, i)
		}
		if err := c.putRaw(k, recs[i]); err != nil {
			return err
		}
	}
	return nil
}

// putRaw sends one put; c.mu must be held.
func (c *Client) putRaw(key, value string) error {
	_, err := c.call("put", "cmd=put kvsname="+c.kvsname+" key="+key+" value="+value, "put_result")
	return err
}

// getRaw sends one get; c.mu must be held.
func (c *Client) getRaw(key string) (string, error) {
	r, err := c.call("get", "cmd=get kvsname="+c.kvsname+" key="+key, "get_result")
	if err != nil {
		return "", err
	}
	v, err := r.need("get", "value")
	if err != nil {
		c.broken = err
	}
	return v, err
}

// maxPieces bounds the piece count a Get believes, so that a corrupt head
// record cannot send it into millions of round trips.
const maxPieces = 1 << 16

// Get returns the value another process (or this one) stored with Put,
// reassembled and decoded. A key nobody put is an *Error from the launcher
// (Hydra: rc=-1 msg=key_<key>_not_found). Call Barrier between the Put and
// the Get.
func (c *Client) Get(key string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.ready("get"); err != nil {
		return "", err
	}
	if err := c.checkKey("get", key, len(key)); err != nil {
		return "", err
	}
	head, err := c.getRaw(key)
	if err != nil {
		return "", err
	}
	nText, first, ok := strings.Cut(head, ":")
	n, err := strconv.Atoi(nText)
	if !ok || err != nil || n < 1 || n > maxPieces {
		return "", fmt.Errorf("%w: cmd=get key=%s: value %q was not written by Put (expected N:base64)", ErrProtocol, key, clip(head))
	}
	var b strings.Builder
	b.WriteString(first)
	for i := 1; i < n; i++ {
		p, err := c.getRaw(partKey(key, i))
		if err != nil {
			return "", fmt.Errorf("pmi: cmd=get key=%s: piece %d of %d: %w", key, i, n, err)
		}
		b.WriteString(p)
	}
	raw, err := base64.RawURLEncoding.DecodeString(b.String())
	if err != nil {
		return "", fmt.Errorf("%w: cmd=get key=%s: value is not the base64 Put writes: %v", ErrProtocol, key, err)
	}
	return string(raw), nil
}

// GetRaw returns the value stored under key exactly as the launcher sends
// it, without Put's decoding: for keys the launcher defines (PMI_*) and for
// values put by programs that do not use this package's encoding.
func (c *Client) GetRaw(key string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.ready("get"); err != nil {
		return "", err
	}
	if strings.ContainsAny(key, " =\t\r\n") || key == "" {
		return "", fmt.Errorf("pmi: get: key %q cannot be sent on the wire", clip(key))
	}
	return c.getRaw(key)
}

// Barrier blocks until every process of the job has entered it, and makes
// every Put before it visible to every Get after it. It is a barrier of
// processes, not of goroutines: exactly one goroutine per process must call
// it per round, or the job deadlocks as with MPI_Barrier.
func (c *Client) Barrier() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.ready("barrier_in"); err != nil {
		return err
	}
	_, err := c.call("barrier_in", "cmd=barrier_in", "barrier_out")
	return err
}

// ProcessMapping returns the launcher's host map (the PMI_process_mapping
// key): which node runs each rank. Use ExpandMapping with Size for the node
// of every rank.
func (c *Client) ProcessMapping() ([]Block, error) {
	v, err := c.GetRaw("PMI_process_mapping")
	if err != nil {
		return nil, err
	}
	return ParseMapping(v)
}

// Abort asks the launcher to end the whole job with exit status code, and
// closes the connection. msg travels as the rest of the line, on one line
// (Hydra 4.0 ignores it; the caller should also print it). The launcher kills
// the job soon after, but Abort itself returns: the caller decides how this
// process exits. Abort does not wait for a command in flight (a Barrier that
// will never end, say): it writes between commands' lines and the waiting
// command fails once the connection is closed.
func (c *Client) Abort(code int, msg string) error {
	// The message is the rest of the line (as MPICH's own libpmi sends it):
	// spaces stay, line breaks and other control characters become spaces.
	msg = strings.TrimSpace(strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, msg))
	line := "cmd=abort exitcode=" + strconv.Itoa(code)
	if msg != "" {
		line += " message=" + msg
	}
	c.wmu.Lock()
	_, err := io.WriteString(c.conn, line+"\n")
	c.wmu.Unlock()
	c.conn.Close()
	if err != nil {
		return fmt.Errorf("pmi: sending cmd=abort: %w", err)
	}
	return nil
}

// Finalize ends the conversation (finalize, answered by finalize_ack) and
// closes the connection. The launcher then expects this process to exit.
func (c *Client) Finalize() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.ready("finalize"); err != nil {
		return err
	}
	_, err := c.call("finalize", "cmd=finalize", "finalize_ack")
	cerr := c.conn.Close()
	c.broken = errors.New("pmi: command after Finalize")
	if err != nil {
		return err
	}
	return cerr
}
