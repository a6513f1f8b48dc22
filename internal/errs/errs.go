// Package errs defines the error value every Weft call returns and its classes.
// It sits below every other package so that all layers report errors in one shape.
package errs

import (
	"fmt"
	"strings"
)

// Class is an MPI error class. A Class is itself an error, so
// errors.Is(err, mpi.ErrTruncate) works on any error Weft returns.
type Class int

// The classes, named after MPI's (MPI_ERR_TRUNCATE is Truncate), plus Panic and Aborted.
const (
	Arg        Class = iota + 1 // an argument out of its domain
	Buffer                      // an invalid buffer, or a Bsend buffer too small
	Count                       // an invalid element count
	Comm                        // a nil or freed communicator
	Rank                        // a rank out of range
	Tag                         // a tag out of range
	Request                     // a request used wrongly (freed, already completed, active, ...)
	Truncate                    // a message longer than the receive buffer
	ProcFailed                  // a peer died or a connection broke
	Aborted                     // the job was aborted (Abort, or a rank failed)
	Panic                       // a rank panicked
	Intern                      // an internal invariant failed: a Weft bug
	Root                        // an invalid root of a collective
	Op                          // an invalid reduction operation, or one not defined on the type
	Group                       // a nil group, or one that is not a subgroup of the communicator's
)

var classNames = [...]string{
	Arg:        "invalid argument",
	Buffer:     "invalid buffer",
	Count:      "invalid count",
	Comm:       "invalid communicator",
	Rank:       "invalid rank",
	Tag:        "invalid tag",
	Request:    "invalid request",
	Truncate:   "message truncated",
	ProcFailed: "process failed",
	Aborted:    "job aborted",
	Panic:      "rank panicked",
	Intern:     "internal error",
	Root:       "invalid root",
	Op:         "invalid operation",
	Group:      "invalid group",
}

func (c Class) Error() string {
	if c > 0 && int(c) < len(classNames) {
		return classNames[c]
	}
	return fmt.Sprintf("error class %d", int(c))
}

// Wildcards and the null process, as MPI defines them (and as MPICH numbers them).
// They live here because error messages print them by name.
const (
	AnySource = -2
	AnyTag    = -1
	ProcNull  = -1
)

// None marks a Rank, Peer or Tag field that does not apply to an error.
const None = -1 << 31

// Error is the error every Weft call returns. Fields that do not apply hold None.
type Error struct {
	Class  Class
	Op     string // the call that failed, e.g. "Recv"
	Rank   int    // the calling rank in the communicator of the call
	Peer   int    // the other rank (destination or source); may be AnySource
	Tag    int    // the message tag; may be AnyTag
	Code   int    // the exit code, for Aborted
	Detail string // what was expected and what was found
	Err    error  // an underlying cause, if any
}

// New returns an error of class c for call op on rank with no peer or tag.
func New(c Class, op string, rank int, format string, args ...any) *Error {
	return &Error{Class: c, Op: op, Rank: rank, Peer: None, Tag: None, Detail: fmt.Sprintf(format, args...)}
}

// NewMsg returns an error of class c about a message between rank and peer with tag.
func NewMsg(c Class, op string, rank, peer, tag int, format string, args ...any) *Error {
	return &Error{Class: c, Op: op, Rank: rank, Peer: peer, Tag: tag, Detail: fmt.Sprintf(format, args...)}
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("weft: ")
	if e.Rank != None {
		fmt.Fprintf(&b, "rank %d: ", e.Rank)
	}
	b.WriteString(e.Op)
	if e.Peer != None || e.Tag != None {
		b.WriteString("(")
		if e.Peer != None {
			b.WriteString("peer " + peerName(e.Peer))
		}
		if e.Tag != None {
			if e.Peer != None {
				b.WriteString(", ")
			}
			b.WriteString("tag " + tagName(e.Tag))
		}
		b.WriteString(")")
	}
	b.WriteString(": ")
	b.WriteString(e.Class.Error())
	if e.Detail != "" {
		b.WriteString(": " + e.Detail)
	}
	if e.Err != nil {
		b.WriteString(": " + e.Err.Error())
	}
	return b.String()
}

// Unwrap exposes the class (for errors.Is) and the cause.
func (e *Error) Unwrap() []error {
	if e.Err != nil {
		return []error{e.Class, e.Err}
	}
	return []error{e.Class}
}

func peerName(p int) string {
	switch p {
	case AnySource:
		return "AnySource"
	case ProcNull:
		return "ProcNull"
	}
	return fmt.Sprint(p)
}

func tagName(t int) string {
	if t == AnyTag {
		return "AnyTag"
	}
	return fmt.Sprint(t)
}
