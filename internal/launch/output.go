package launch

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"sync"
)

// maxOutLine is the longest line forwarded whole. A longer one is forwarded
// in pieces of this size, each ended by a newline, so that a proc that never
// writes a newline cannot make the launcher buffer without bound.
const maxOutLine = 64 << 10

// output is the launcher's standard output and error, shared by every proc's
// forwarders and the launcher's own notes. One lock over both streams and one
// write per line: the lines of two procs never mix, even when stdout and
// stderr are one file.
type output struct {
	mu             sync.Mutex
	stdout, stderr io.Writer
}

func newOutput(stdout, stderr io.Writer) *output {
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	return &output{stdout: stdout, stderr: stderr}
}

// forward copies r to w line by line, each line prefixed with prefix, until r
// ends or fails. A last line without its newline gets one. Write errors are
// ignored, so that a proc never blocks on output nobody reads.
func (o *output) forward(r io.Reader, w io.Writer, prefix string) {
	br := bufio.NewReaderSize(r, maxOutLine)
	buf := []byte(prefix)
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			buf = append(buf[:len(prefix)], line...)
			if buf[len(buf)-1] != '\n' {
				buf = append(buf, '\n')
			}
			o.mu.Lock()
			w.Write(buf)
			o.mu.Unlock()
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}

// notef writes a note of the launcher's own to stderr.
func (o *output) notef(format string, a ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	fmt.Fprintf(o.stderr, "weft run: "+format+"\n", a...)
}

// tag is the prefix --tag-output puts before each line of a proc's output.
func tag(first, n int) string {
	return "[" + rankText(first, n) + "] "
}
