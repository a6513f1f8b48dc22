// Package testout is output that a test reads while the program writing it runs:
// a buffer safe for concurrent writes whose reader can wait until something
// appears in it.
package testout

import (
	"bytes"
	"sync"
	"time"
)

// Buffer collects output; the zero value is not ready, use New.
type Buffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changed chan struct{} // closed and replaced at every write
}

// New returns an empty Buffer.
func New() *Buffer { return &Buffer{changed: make(chan struct{})} }

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.changed)
	s.changed = make(chan struct{})
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Await waits, up to d, until cond holds for what was written, and reports
// whether it did.
func (s *Buffer) Await(d time.Duration, cond func(out string) bool) bool {
	deadline := time.After(d)
	for {
		s.mu.Lock()
		out, changed := s.b.String(), s.changed
		s.mu.Unlock()
		if cond(out) {
			return true
		}
		select {
		case <-changed:
		case <-deadline:
			return false
		}
	}
}
