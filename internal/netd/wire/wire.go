// Package wire is the byte format of the network device's messages: a fixed,
// versioned, little-endian header, optionally followed by a payload. The
// receive daemon reads Size bytes, parses them with Parse, and then reads the
// Frag payload bytes that follow. Nothing here does I/O; docs/protocol.md
// describes the layout and when each kind is sent.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Version is the header format's version, the first byte of every header.
// Peers agree on it in the connection handshake (package auth); a header of
// another version is refused by Parse.
const Version = 1

// Size is the fixed length of a header in bytes.
const Size = 72

// MaxLen bounds Header.Len, the length of a whole message: 2^48 bytes
// (256 TiB), more than any buffer a process can address today. The bound keeps
// Offset+Frag free of overflow and every length representable as an int on
// 64-bit platforms.
const MaxLen = 1 << 48

// MaxFrag bounds Header.Frag, the payload bytes following one header (1 GiB).
// An eager message is a single fragment, so it is at most MaxFrag bytes; a
// larger message is sent as several Data fragments.
const MaxFrag = 1 << 30

// Kind says what a message is. The zero Kind is invalid.
type Kind uint8

// The kinds. Their numbers are part of the protocol: never renumber.
const (
	// Eager: envelope and the whole payload (Frag == Len) in one message.
	Eager Kind = 1
	// RTS (request to send): envelope, Len and the sender's request id; no payload.
	RTS Kind = 2
	// CTS (clear to send): the receiver's answer to an RTS, carrying both request ids;
	// Len is the number of bytes the receiver will take.
	CTS Kind = 3
	// Data: a fragment [Offset, Offset+Frag) of a message of Len bytes, after a CTS or a Pull.
	Data Kind = 4
	// Kind 5 is reserved: version 1 sends synchronous sends in three phases, whose
	// CTS tells the sender that its receive matched.
	// Ack: the receiver holds the payload of SendReq (accepted eager, or all Data
	// received); the sender may release its copy.
	Ack Kind = 6
	// CancelReq: the sender asks the receiver to cancel its unmatched send SendReq.
	CancelReq Kind = 7
	// CancelReply: the receiver's answer; FlagCancelled set when the send was cancelled.
	CancelReply Kind = 8
	// Pull: the receiver dropped an eager payload (pool full) and now asks the sender
	// for it; the sender answers with Data messages carrying RecvReq.
	Pull Kind = 9
	// Coll: a message of the collective channel; Context and Seq name the collective
	// operation, Tag is the collective layer's own, Offset/Frag/Len as for Data.
	Coll Kind = 10
	// Close: the sender will send nothing more on this connection (orderly
	// shutdown); Seq is the number of messages it sent before.
	Close Kind = 11

	maxKind = Close
)

var kindNames = [...]string{
	Eager:       "Eager",
	RTS:         "RTS",
	CTS:         "CTS",
	Data:        "Data",
	Ack:         "Ack",
	CancelReq:   "CancelReq",
	CancelReply: "CancelReply",
	Pull:        "Pull",
	Coll:        "Coll",
	Close:       "Close",
}

func (k Kind) String() string {
	if k >= 1 && k <= maxKind && kindNames[k] != "" {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Flag bits of Header.Flags. Bits not defined here must be zero.
const (
	// FlagSsend on RTS: a synchronous send (informative: its CTS completes it).
	FlagSsend uint16 = 1 << 0
	// FlagReady on Eager or RTS: a ready-mode send; the receive must already be posted.
	FlagReady uint16 = 1 << 1
	// FlagCancelled on CancelReply: the send was cancelled (else it had been matched).
	FlagCancelled uint16 = 1 << 2

	knownFlags = FlagSsend | FlagReady | FlagCancelled
)

// Header is a decoded message header. See docs/protocol.md for the byte layout.
type Header struct {
	Kind    Kind
	Flags   uint16
	Context uint32 // communicator context id
	Source  int32  // global rank of the sender
	Dest    int32  // global rank of the receiver
	Tag     int32
	Frag    uint32 // payload bytes following this header
	Len     uint64 // payload bytes of the whole message
	SendReq uint64 // sender's request id, 0 when unused
	RecvReq uint64 // receiver's request id, 0 when unused
	Seq     uint64 // per-pair (or, for Coll, per-communicator) sequence number
	Offset  uint64 // position of this fragment in the message (Data, Coll)
}

// Byte offsets of the fields.
const (
	offVersion  = 0
	offKind     = 1
	offFlags    = 2
	offContext  = 4
	offSource   = 8
	offDest     = 12
	offTag      = 16
	offFrag     = 20
	offLen      = 24
	offSendReq  = 32
	offRecvReq  = 40
	offSeq      = 48
	offOffset   = 56
	offReserved = 64 // 8 bytes, zero
)

// Put encodes h into b[:Size]. It does not validate h (Parse does, on the
// other side) and does not allocate. b must be at least Size bytes long.
func (h *Header) Put(b []byte) {
	_ = b[Size-1]
	b[offVersion] = Version
	b[offKind] = byte(h.Kind)
	binary.LittleEndian.PutUint16(b[offFlags:], h.Flags)
	binary.LittleEndian.PutUint32(b[offContext:], h.Context)
	binary.LittleEndian.PutUint32(b[offSource:], uint32(h.Source))
	binary.LittleEndian.PutUint32(b[offDest:], uint32(h.Dest))
	binary.LittleEndian.PutUint32(b[offTag:], uint32(h.Tag))
	binary.LittleEndian.PutUint32(b[offFrag:], h.Frag)
	binary.LittleEndian.PutUint64(b[offLen:], h.Len)
	binary.LittleEndian.PutUint64(b[offSendReq:], h.SendReq)
	binary.LittleEndian.PutUint64(b[offRecvReq:], h.RecvReq)
	binary.LittleEndian.PutUint64(b[offSeq:], h.Seq)
	binary.LittleEndian.PutUint64(b[offOffset:], h.Offset)
	binary.LittleEndian.PutUint64(b[offReserved:], 0)
}

// ErrHeader is the class of every error Parse and Check return:
// errors.Is(err, ErrHeader) tells a malformed header from an I/O error.
var ErrHeader = errors.New("wire: bad header")

// FieldError says which field of a header is wrong, its value, and why.
type FieldError struct {
	Kind   Kind   // the header's kind, 0 if it was not decoded yet
	Field  string // "Version", "Kind", "Flags", "Frag", ... or "length", "reserved"
	Value  any    // the offending value, in the field's own type
	Reason string
}

func (e *FieldError) Error() string {
	if e.Kind != 0 {
		return fmt.Sprintf("wire: bad %s header: %s = %v: %s", e.Kind, e.Field, e.Value, e.Reason)
	}
	return fmt.Sprintf("wire: bad header: %s = %v: %s", e.Field, e.Value, e.Reason)
}

// Unwrap makes errors.Is(err, ErrHeader) true.
func (e *FieldError) Unwrap() error { return ErrHeader }

func bad(k Kind, field string, v any, reason string) error {
	return &FieldError{Kind: k, Field: field, Value: v, Reason: reason}
}

// Parse decodes and validates a header from b[:Size]. Bytes after Size are
// ignored. It checks the length, version, kind, reserved bytes, flag bits and
// that the fields are consistent with the kind (see Check). It never panics.
func Parse(b []byte) (Header, error) {
	if len(b) < Size {
		return Header{}, bad(0, "length", len(b), fmt.Sprintf("want at least %d bytes", Size))
	}
	if b[offVersion] != Version {
		return Header{}, bad(0, "Version", b[offVersion], fmt.Sprintf("want %d", Version))
	}
	if r := binary.LittleEndian.Uint64(b[offReserved:]); r != 0 {
		return Header{}, bad(Kind(b[offKind]), "reserved", fmt.Sprintf("%#x", r), "bytes 64-71 must be zero")
	}
	h := Header{
		Kind:    Kind(b[offKind]),
		Flags:   binary.LittleEndian.Uint16(b[offFlags:]),
		Context: binary.LittleEndian.Uint32(b[offContext:]),
		Source:  int32(binary.LittleEndian.Uint32(b[offSource:])),
		Dest:    int32(binary.LittleEndian.Uint32(b[offDest:])),
		Tag:     int32(binary.LittleEndian.Uint32(b[offTag:])),
		Frag:    binary.LittleEndian.Uint32(b[offFrag:]),
		Len:     binary.LittleEndian.Uint64(b[offLen:]),
		SendReq: binary.LittleEndian.Uint64(b[offSendReq:]),
		RecvReq: binary.LittleEndian.Uint64(b[offRecvReq:]),
		Seq:     binary.LittleEndian.Uint64(b[offSeq:]),
		Offset:  binary.LittleEndian.Uint64(b[offOffset:]),
	}
	if err := h.Check(); err != nil {
		return Header{}, err
	}
	return h, nil
}

// Check validates h as Parse does (all but version and reserved bytes, which
// a Header does not hold). A sender may call it in tests or debug builds.
func (h *Header) Check() error {
	k := h.Kind
	if k < 1 || k > maxKind || kindNames[k] == "" {
		return bad(0, "Kind", uint8(k), "unknown kind")
	}
	if h.Flags&^knownFlags != 0 {
		return bad(k, "Flags", fmt.Sprintf("%#x", h.Flags), fmt.Sprintf("unknown bits %#x", h.Flags&^knownFlags))
	}
	// Which flags each kind may carry.
	var allowed uint16
	switch k {
	case Eager, RTS:
		allowed = FlagSsend | FlagReady
	case CancelReply:
		allowed = FlagCancelled
	}
	if h.Flags&^allowed != 0 {
		return bad(k, "Flags", fmt.Sprintf("%#x", h.Flags), "flag not allowed on this kind")
	}
	if h.Flags&(FlagSsend|FlagReady) == FlagSsend|FlagReady {
		return bad(k, "Flags", fmt.Sprintf("%#x", h.Flags), "Ssend and Ready are exclusive")
	}
	if h.Source < 0 {
		return bad(k, "Source", h.Source, "must be a rank >= 0")
	}
	if h.Dest < 0 {
		return bad(k, "Dest", h.Dest, "must be a rank >= 0")
	}
	if k != Coll && h.Tag < 0 {
		return bad(k, "Tag", h.Tag, "must be >= 0")
	}
	if h.Len > MaxLen {
		return bad(k, "Len", h.Len, "exceeds MaxLen (2^48)")
	}
	if h.Frag > MaxFrag {
		return bad(k, "Frag", h.Frag, "exceeds MaxFrag (2^30)")
	}

	switch k {
	case Eager:
		if uint64(h.Frag) != h.Len {
			return bad(k, "Frag", h.Frag, fmt.Sprintf("eager payload must be the whole message (Len %d)", h.Len))
		}
	case Data, Coll:
		if h.Offset > h.Len || uint64(h.Frag) > h.Len-h.Offset {
			return bad(k, "Offset", h.Offset, fmt.Sprintf("fragment [%d, %d+%d) outside message of Len %d", h.Offset, h.Offset, h.Frag, h.Len))
		}
		if k == Data && h.Frag == 0 && h.Len != 0 {
			return bad(k, "Frag", h.Frag, "empty Data fragment of a non-empty message")
		}
	default:
		if h.Frag != 0 {
			return bad(k, "Frag", h.Frag, "this kind carries no payload")
		}
	}
	if k != Data && k != Coll && h.Offset != 0 {
		return bad(k, "Offset", h.Offset, "only Data and Coll carry an offset")
	}
	switch k {
	case Ack, CancelReq, CancelReply, Close:
		if h.Len != 0 {
			return bad(k, "Len", h.Len, "must be 0 on this kind")
		}
	}

	// Request ids.
	switch k {
	case Eager, RTS: // RecvReq: an Ack riding along, 0 for none
		if h.SendReq == 0 {
			return bad(k, "SendReq", h.SendReq, "must name the sender's request")
		}
	case CancelReq:
		if h.SendReq == 0 {
			return bad(k, "SendReq", h.SendReq, "must name the sender's request")
		}
		if h.RecvReq != 0 {
			return bad(k, "RecvReq", h.RecvReq, "must be 0 on this kind")
		}
	case CTS, Data, Pull:
		if h.SendReq == 0 {
			return bad(k, "SendReq", h.SendReq, "must name the sender's request")
		}
		if h.RecvReq == 0 {
			return bad(k, "RecvReq", h.RecvReq, "must name the receiver's request")
		}
	case Ack, CancelReply:
		if h.SendReq == 0 {
			return bad(k, "SendReq", h.SendReq, "must name the sender's request")
		}
	case Close:
		if h.SendReq != 0 {
			return bad(k, "SendReq", h.SendReq, "must be 0 on Close")
		}
		if h.RecvReq != 0 {
			return bad(k, "RecvReq", h.RecvReq, "must be 0 on Close")
		}
	case Coll:
		// Free for the collective layer.
	}
	return nil
}
