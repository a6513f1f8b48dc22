package mpi

import "github.com/weft-mpi/weft/internal/errs"

// Error is the error every Weft call returns. Test its class with errors.Is
// (errors.Is(err, mpi.ErrTruncate)); its message names the rank, the peer, the tag
// and what was expected. Fields that do not apply hold NoValue.
type Error = errs.Error

// Class is an error class; every Class is an error, for errors.Is.
type Class = errs.Class

// NoValue marks a Rank, Peer or Tag field of an Error that does not apply.
const NoValue = errs.None

// The error classes.
const (
	ErrArg        = errs.Arg        // an argument out of its domain
	ErrBuffer     = errs.Buffer     // an invalid buffer, or a Bsend buffer too small
	ErrCount      = errs.Count      // an invalid element count
	ErrComm       = errs.Comm       // a nil or freed communicator
	ErrRank       = errs.Rank       // a rank out of range
	ErrTag        = errs.Tag        // a tag out of range
	ErrRequest    = errs.Request    // a request used wrongly
	ErrTruncate   = errs.Truncate   // a message longer than the receive buffer
	ErrProcFailed = errs.ProcFailed // a peer died or failed
	ErrAborted    = errs.Aborted    // the job was aborted with Abort
	ErrPanic      = errs.Panic      // a rank panicked (the error carries the stack)
	ErrIntern     = errs.Intern     // a Weft bug
	ErrRoot       = errs.Root       // a collective's root out of range, or different on different ranks
	ErrOp         = errs.Op         // a reduction operation not defined on the element type
	ErrGroup      = errs.Group      // a nil group, or one that is not a subgroup of the communicator's
)
