package bench

import (
	"fmt"
	"io"
	"os"
	"sync"
)

// progress writes one line per run and, on a terminal, a status line that
// each new status overwrites.
type progress struct {
	mu       sync.Mutex
	w        io.Writer
	terminal bool
	status   bool // a status line is showing
}

func newProgress(w io.Writer) *progress {
	p := &progress{w: w}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.terminal = true
		}
	}
	return p
}

// statusf shows a status line on a terminal ("" clears it); elsewhere
// nothing.
func (p *progress) statusf(format string, a ...any) {
	if !p.terminal {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	s := ""
	if format != "" {
		s = fmt.Sprintf(format, a...)
	}
	fmt.Fprintf(p.w, "\r\033[K%s", s)
	p.status = s != ""
}

// linef writes a line, over the status line if one is showing.
func (p *progress) linef(format string, a ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.status {
		io.WriteString(p.w, "\r\033[K")
		p.status = false
	}
	fmt.Fprintf(p.w, format+"\n", a...)
}
