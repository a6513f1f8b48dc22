package shmem

import (
	"os"
	"testing"
	"time"
)

// segment returns a new segment of 4096 bytes, unmapped when the test ends,
// and its file; the test is skipped where there are no segments.
func segment(t *testing.T) (*Segment, *os.File) {
	t.Helper()
	s, f, err := Create(4096)
	if err == ErrUnsupported {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Unmap() })
	return s, f
}

// TestSleepWake: a sleeper on a word of a segment is woken by Wake after the
// word changed, and does not sleep at all if the word is no longer the value it
// saw; a mapping of the segment's file sees the same words.
func TestSleepWake(t *testing.T) {
	s, f := segment(t)
	m, err := Map(f, 4096)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer m.Unmap()
	w := s.Word32(64)
	woke := make(chan struct{})
	go func() {
		for w.Load() == 0 {
			Sleep(w, 0, time.Minute)
		}
		close(woke)
	}()
	time.Sleep(10 * time.Millisecond) // asleep by now, most likely
	m.Word32(64).Store(1)
	Wake(m.Word32(64))
	select {
	case <-woke:
	case <-time.After(10 * time.Second):
		t.Fatal("the sleeper was not woken")
	}
	done := make(chan struct{})
	go func() { Sleep(w, 0, time.Minute); close(done) }() // w is 1: no sleep
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("slept on a word that had changed")
	}
}

// TestMapRefuses: Map takes only a sealed file of the expected size.
func TestMapRefuses(t *testing.T) {
	_, f := segment(t)
	defer f.Close()
	if m, err := Map(f, 8192); err == nil {
		m.Unmap()
		t.Fatal("mapped a segment of 4096 bytes as 8192")
	}
	plain, err := os.CreateTemp(t.TempDir(), "seg")
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	plain.Truncate(4096)
	if m, err := Map(plain, 4096); err == nil {
		m.Unmap()
		t.Fatal("mapped a file that is not sealed")
	}
}
