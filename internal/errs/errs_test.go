package errs

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestErrorNamesEverything(t *testing.T) {
	e := NewMsg(Truncate, "Recv", 3, AnySource, 7, "a %d-byte message does not fit the %d-byte receive buffer", 16, 8)
	want := "weft: rank 3: Recv(peer AnySource, tag 7): message truncated: a 16-byte message does not fit the 8-byte receive buffer"
	if e.Error() != want {
		t.Fatalf("got  %q\nwant %q", e.Error(), want)
	}
	if got := New(Comm, "Dup", None, "the communicator is nil").Error(); got != "weft: Dup: invalid communicator: the communicator is nil" {
		t.Fatalf("an error without rank, peer or tag prints %q", got)
	}
	if got := NewMsg(Tag, "Send", 0, 1, AnyTag, "x").Error(); !strings.Contains(got, "(peer 1, tag AnyTag)") {
		t.Fatalf("%q", got)
	}
	if got := NewMsg(Rank, "Recv", 0, ProcNull, None, "x").Error(); !strings.Contains(got, "(peer ProcNull)") {
		t.Fatalf("%q", got)
	}
}

func TestClassesWorkWithErrorsIs(t *testing.T) {
	cause := errors.New("disk on fire")
	e := &Error{Class: ProcFailed, Op: "Recv", Rank: 1, Peer: 2, Tag: 0, Err: cause}
	wrapped := fmt.Errorf("rank 1: %w", e)
	if !errors.Is(wrapped, ProcFailed) || !errors.Is(wrapped, cause) || errors.Is(wrapped, Truncate) {
		t.Fatal("errors.Is does not see the class and cause through wrapping")
	}
	var got *Error
	if !errors.As(errors.Join(errors.New("other"), wrapped), &got) || got != e {
		t.Fatal("errors.As does not find the *Error in a join")
	}
	if Class(99).Error() != "error class 99" {
		t.Fatal(Class(99).Error())
	}
}
