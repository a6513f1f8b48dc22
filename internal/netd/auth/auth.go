// Package auth is the handshake that opens every connection between two procs
// of a job: each side proves that it knows the job's key (an HMAC-SHA256
// challenge-response over fresh nonces) before any byte of user data crosses
// the connection. A stranger (a port scanner, a proc of another job, a peer
// with the wrong key) is refused with an error the caller can classify and log.
//
// The handshake authenticates the peer when the connection opens. It does not
// protect the bytes that follow from an attacker on the path: that needs a
// secure transport under the connection (TLS, a private network).
package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/weft-mpi/weft/internal/netd/wire"
)

// Magic opens every hello.
const Magic = "WEFT"

// Version is the protocol version a hello announces: the wire header's version.
// Peers of different versions refuse each other here, before any header is sent.
const Version = wire.Version

// Sizes and bounds.
const (
	NonceSize   = 32          // bytes of a hello's random nonce
	ProofSize   = sha256.Size // bytes of a proof (HMAC-SHA256)
	MaxJob      = 255         // longest job id, in bytes
	MinKey      = 16          // shortest job key accepted, in bytes
	MaxProc     = 1<<31 - 1   // largest proc index
	helloFixed  = 48          // bytes of a hello before the job id
	MaxHello    = helloFixed + MaxJob
	MaxRead     = MaxHello + ProofSize // the most Handshake ever reads from a peer
	macLabel    = "weft-auth v1"
	roleInit    = 'I'
	roleRespond = 'R'
)

// DefaultTimeout bounds a handshake whose Config has no Timeout.
const DefaultTimeout = 10 * time.Second

// Channels a connection carries (wire: TMPI's two connections per pair of procs).
const (
	ChannelP2P  = 0 // point-to-point messages
	ChannelColl = 1 // collective messages
)

// Errors. Every error Handshake returns because of the peer wraps exactly one
// of these, so that a caller can log "stranger" apart from "wrong key".
var (
	// ErrNotWeft: the peer does not speak this protocol: wrong magic, a malformed
	// or over-long hello, a short read, a timeout, a closed connection.
	ErrNotWeft = errors.New("auth: peer is not a Weft proc")
	// ErrVersion: a Weft peer of another protocol version.
	ErrVersion = errors.New("auth: protocol version mismatch")
	// ErrWrongJob: a Weft peer of another job.
	ErrWrongJob = errors.New("auth: peer belongs to another job")
	// ErrBadKey: the peer did not prove knowledge of the job key (a wrong key,
	// or a reflection of our own hello or proof).
	ErrBadKey = errors.New("auth: peer failed to prove the job key")
)

// Conn is what Handshake needs of a connection; a net.Conn is one.
type Conn interface {
	io.ReadWriter
	SetDeadline(t time.Time) error
}

// Hello is what each side announces.
type Hello struct {
	Version uint8
	Channel uint8  // ChannelP2P or ChannelColl; the responder echoes the initiator's
	Proc    uint32 // the sender's proc index in the job
	Nonce   [NonceSize]byte
	Job     string
}

// Layout of an encoded hello (little endian):
//
//	0  4  magic "WEFT"
//	4  1  version
//	5  1  channel
//	6  2  job id length n (1..MaxJob)
//	8  4  proc index (<= MaxProc)
//	12 4  reserved, zero
//	16 32 nonce
//	48 n  job id
//
// Magic and version stay at bytes 0..4 in every version; a future version's
// hello is at least 48 bytes long.

// AppendHello appends the encoding of h to b.
func AppendHello(b []byte, h *Hello) []byte {
	var f [helloFixed]byte
	copy(f[0:4], Magic)
	f[4] = h.Version
	f[5] = h.Channel
	binary.LittleEndian.PutUint16(f[6:], uint16(len(h.Job)))
	binary.LittleEndian.PutUint32(f[8:], h.Proc)
	copy(f[16:], h.Nonce[:])
	b = append(b, f[:]...)
	return append(b, h.Job...)
}

// checkFixed validates the fixed part of a hello and returns the job id length.
func checkFixed(f []byte) (int, error) {
	if string(f[0:4]) != Magic {
		return 0, fmt.Errorf("%w: bad magic %q", ErrNotWeft, f[0:4])
	}
	if f[4] != Version {
		return 0, fmt.Errorf("%w: peer speaks version %d, we speak %d", ErrVersion, f[4], Version)
	}
	if c := f[5]; c != ChannelP2P && c != ChannelColl {
		return 0, fmt.Errorf("%w: unknown channel %d", ErrNotWeft, c)
	}
	n := int(binary.LittleEndian.Uint16(f[6:]))
	if n == 0 || n > MaxJob {
		return 0, fmt.Errorf("%w: job id length %d not in 1..%d", ErrNotWeft, n, MaxJob)
	}
	if p := binary.LittleEndian.Uint32(f[8:]); p > MaxProc {
		return 0, fmt.Errorf("%w: proc index %d > %d", ErrNotWeft, p, MaxProc)
	}
	if r := binary.LittleEndian.Uint32(f[12:]); r != 0 {
		return 0, fmt.Errorf("%w: reserved bytes %#x not zero", ErrNotWeft, r)
	}
	return n, nil
}

// DecodeHello decodes one hello from the start of b and returns it with the
// number of bytes it took. Errors wrap ErrNotWeft or ErrVersion.
func DecodeHello(b []byte) (Hello, int, error) {
	if len(b) < helloFixed {
		return Hello{}, 0, fmt.Errorf("%w: hello of %d bytes, want at least %d", ErrNotWeft, len(b), helloFixed)
	}
	n, err := checkFixed(b[:helloFixed])
	if err != nil {
		return Hello{}, 0, err
	}
	if len(b) < helloFixed+n {
		return Hello{}, 0, fmt.Errorf("%w: hello of %d bytes, job id needs %d", ErrNotWeft, len(b), helloFixed+n)
	}
	h := Hello{
		Version: b[4],
		Channel: b[5],
		Proc:    binary.LittleEndian.Uint32(b[8:]),
		Job:     string(b[helloFixed : helloFixed+n]),
	}
	copy(h.Nonce[:], b[16:helloFixed])
	return h, helloFixed + n, nil
}

// readHello reads one hello from r, never more than MaxHello bytes, and
// returns it with its exact bytes (for the MAC).
func readHello(r io.Reader) (Hello, []byte, error) {
	buf := make([]byte, helloFixed, MaxHello)
	if _, err := io.ReadFull(r, buf); err != nil {
		return Hello{}, nil, fmt.Errorf("%w: reading hello: %w", ErrNotWeft, err)
	}
	n, err := checkFixed(buf)
	if err != nil {
		return Hello{}, nil, err
	}
	buf = buf[:helloFixed+n]
	if _, err := io.ReadFull(r, buf[helloFixed:]); err != nil {
		return Hello{}, nil, fmt.Errorf("%w: reading job id: %w", ErrNotWeft, err)
	}
	h, _, err := DecodeHello(buf)
	return h, buf, err
}

// Config is one side's part in a handshake.
type Config struct {
	Key       []byte // the job key, at least MinKey bytes
	Job       string // the job id, 1..MaxJob bytes
	Proc      uint32 // our proc index, unique in the job
	Channel   uint8  // initiator only: which channel this connection carries
	Initiator bool   // true on the side that dialed
	// Timeout bounds the whole handshake (DefaultTimeout when zero). Handshake
	// sets a deadline on the connection and clears it before returning.
	Timeout time.Duration
}

func proof(key []byte, role byte, helloI, helloR []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(macLabel))
	m.Write([]byte{role})
	m.Write(helloI)
	m.Write(helloR)
	return m.Sum(nil)
}

// Handshake runs our side of the handshake on conn and returns the peer's
// hello. The sequence is:
//
//	initiator -> responder: hello I
//	responder -> initiator: hello R (its channel echoes I's)
//	initiator -> responder: HMAC(key, "weft-auth v1" || 'I' || hello I || hello R)
//	responder -> initiator: HMAC(key, "weft-auth v1" || 'R' || hello I || hello R)
//
// where hello I and hello R are the exact bytes sent. The responder proves
// nothing until the initiator has, so a stranger who connects learns nothing
// from us but our nonce. Each side refuses a peer that repeats its nonce or
// its proc index (a reflection of our own hello). Handshake reads at most
// MaxRead bytes from the peer; it does not close conn on failure.
func Handshake(conn Conn, cfg Config) (Hello, error) {
	if len(cfg.Key) < MinKey {
		return Hello{}, fmt.Errorf("auth: job key of %d bytes, want at least %d", len(cfg.Key), MinKey)
	}
	if len(cfg.Job) == 0 || len(cfg.Job) > MaxJob {
		return Hello{}, fmt.Errorf("auth: job id of %d bytes, want 1..%d", len(cfg.Job), MaxJob)
	}
	if cfg.Proc > MaxProc {
		return Hello{}, fmt.Errorf("auth: proc index %d > %d", cfg.Proc, MaxProc)
	}
	if cfg.Channel != ChannelP2P && cfg.Channel != ChannelColl {
		return Hello{}, fmt.Errorf("auth: unknown channel %d", cfg.Channel)
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		// The connection is already unusable (net.Pipe refuses deadlines once
		// the peer has hung up): like any failed I/O here, no Weft peer.
		return Hello{}, fmt.Errorf("%w: setting deadline: %w", ErrNotWeft, err)
	}
	peer, err := handshake(conn, &cfg)
	if err != nil {
		return Hello{}, err
	}
	if err := conn.SetDeadline(time.Time{}); err != nil {
		return Hello{}, fmt.Errorf("auth: clearing deadline: %w", err)
	}
	return peer, nil
}

func handshake(conn Conn, cfg *Config) (Hello, error) {
	me := Hello{Version: Version, Channel: cfg.Channel, Proc: cfg.Proc, Job: cfg.Job}
	if _, err := rand.Read(me.Nonce[:]); err != nil {
		return Hello{}, fmt.Errorf("auth: nonce: %w", err)
	}
	var peer Hello
	var mine, theirs []byte
	if cfg.Initiator {
		mine = AppendHello(nil, &me)
		if _, err := conn.Write(mine); err != nil {
			return Hello{}, fmt.Errorf("%w: sending hello: %w", ErrNotWeft, err)
		}
		var err error
		if peer, theirs, err = readHello(conn); err != nil {
			return Hello{}, err
		}
		if err := checkPeer(&me, &peer); err != nil {
			return Hello{}, err
		}
		if peer.Channel != me.Channel {
			return Hello{}, fmt.Errorf("%w: responder answered channel %d, we asked %d", ErrNotWeft, peer.Channel, me.Channel)
		}
		if _, err := conn.Write(proof(cfg.Key, roleInit, mine, theirs)); err != nil {
			return Hello{}, fmt.Errorf("%w: sending proof: %w", ErrNotWeft, err)
		}
		if err := readProof(conn, proof(cfg.Key, roleRespond, mine, theirs), &peer); err != nil {
			return Hello{}, err
		}
		return peer, nil
	}

	var err error
	if peer, theirs, err = readHello(conn); err != nil {
		if errors.Is(err, ErrVersion) {
			// Tell a Weft peer of another version which one we speak, so that
			// it logs the mismatch too; it has proved nothing and learns nothing.
			_, _ = conn.Write(AppendHello(nil, &me))
		}
		return Hello{}, err
	}
	// Answer a Weft peer's hello even when we will refuse it, so that it can
	// log why (wrong job); its fields are validated, and it has proved nothing.
	me.Channel = peer.Channel
	mine = AppendHello(nil, &me)
	if _, err := conn.Write(mine); err != nil {
		return Hello{}, fmt.Errorf("%w: sending hello: %w", ErrNotWeft, err)
	}
	if err := checkPeer(&me, &peer); err != nil {
		return Hello{}, err
	}
	if err := readProof(conn, proof(cfg.Key, roleInit, theirs, mine), &peer); err != nil {
		return Hello{}, err
	}
	if _, err := conn.Write(proof(cfg.Key, roleRespond, theirs, mine)); err != nil {
		return Hello{}, fmt.Errorf("%w: sending proof: %w", ErrNotWeft, err)
	}
	return peer, nil
}

// checkPeer refuses a hello of another job, or one that reflects ours.
func checkPeer(me, peer *Hello) error {
	if peer.Job != me.Job {
		return fmt.Errorf("%w: peer proc %d is in job %q, we are in %q", ErrWrongJob, peer.Proc, peer.Job, me.Job)
	}
	if peer.Nonce == me.Nonce {
		return fmt.Errorf("%w: peer sent our own nonce (reflection)", ErrBadKey)
	}
	if peer.Proc == me.Proc {
		return fmt.Errorf("%w: peer claims our own proc index %d (reflection)", ErrBadKey, me.Proc)
	}
	return nil
}

func readProof(r io.Reader, want []byte, peer *Hello) error {
	var got [ProofSize]byte
	if _, err := io.ReadFull(r, got[:]); err != nil {
		// The peer sent a valid hello but no proof: most likely it refused
		// ours, having another key. The I/O error stays visible to errors.Is.
		return fmt.Errorf("%w: proc %d sent no proof: %w", ErrBadKey, peer.Proc, err)
	}
	if !hmac.Equal(got[:], want) {
		return fmt.Errorf("%w: bad proof from proc %d", ErrBadKey, peer.Proc)
	}
	return nil
}
