package testout

import (
	"strings"
	"testing"
	"time"
)

func TestAwait(t *testing.T) {
	b := New()
	go func() {
		for _, s := range []string{"one\n", "two\n", "three\n"} {
			time.Sleep(time.Millisecond)
			b.Write([]byte(s))
		}
	}()
	if !b.Await(5*time.Second, func(out string) bool { return strings.Contains(out, "three") }) {
		t.Fatalf("Await missed the last write: %q", b.String())
	}
	if got := b.String(); got != "one\ntwo\nthree\n" {
		t.Fatalf("String() = %q", got)
	}
	if b.Await(10*time.Millisecond, func(out string) bool { return strings.Contains(out, "four") }) {
		t.Fatal("Await reported text that never came")
	}
}
