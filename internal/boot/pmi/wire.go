package pmi

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrProtocol is wrapped by every error that reports a reply the client
// cannot use: a line that is not space-separated key=value fields, a reply to
// the wrong command, a missing field, a value that is not what Put wrote. After
// such an error the conversation is out of step, so the Client refuses every
// later command.
var ErrProtocol = errors.New("pmi: protocol error")

// Error is a reply whose rc field is not 0: the launcher understood the
// command and refused it. Msg is the launcher's own words (Hydra writes them
// with underscores instead of spaces, e.g. "key_foo_not_found").
type Error struct {
	Cmd string // the command sent, e.g. "get"
	RC  int    // the launcher's non-zero return code
	Msg string // the msg= field, possibly empty
}

func (e *Error) Error() string {
	if e.Msg == "" {
		return fmt.Sprintf("pmi: cmd=%s refused by the launcher: rc=%d", e.Cmd, e.RC)
	}
	return fmt.Sprintf("pmi: cmd=%s refused by the launcher: rc=%d msg=%s", e.Cmd, e.RC, e.Msg)
}

// reply is one line from the launcher, split into fields.
type reply struct {
	cmd    string            // value of the leading cmd= field
	fields map[string]string // every field, cmd included
}

// maxLine bounds one reply line, so that a runaway peer cannot make us
// buffer without limit. Hydra's longest reply is a get_result with a
// 1023-byte value; the margin leaves room for launchers with larger limits.
const maxLine = 1 << 20

// parseReply splits a PMI-1 line "cmd=NAME k=v k=v" into fields. A field is
// split at its first '=', so values may contain '=' (Hydra returns them that
// way) but never spaces: the wire format has no quoting. The line must begin
// with cmd=, every token must hold an '=' after a non-empty key, and no key
// may repeat.
func parseReply(line string) (reply, error) {
	line = strings.TrimRight(line, "\r\n")
	toks := strings.Fields(line)
	if len(toks) == 0 {
		return reply{}, errors.New("empty line, expected cmd=NAME key=value ...")
	}
	r := reply{fields: make(map[string]string, len(toks))}
	for i, t := range toks {
		k, v, ok := strings.Cut(t, "=")
		if !ok || k == "" {
			return reply{}, fmt.Errorf("field %q in %q is not key=value", clip(t), clip(line))
		}
		if i == 0 && k != "cmd" {
			return reply{}, fmt.Errorf("line %q does not begin with cmd=", clip(line))
		}
		if _, dup := r.fields[k]; dup {
			return reply{}, fmt.Errorf("field %q repeats in %q", clip(k), clip(line))
		}
		r.fields[k] = v
	}
	r.cmd = r.fields["cmd"]
	if r.cmd == "" {
		return reply{}, fmt.Errorf("empty cmd= in %q", clip(line))
	}
	return r, nil
}

// check turns a parsed reply to command sent into an error when it answers a
// different command (want) or carries rc != 0. rc is optional: Hydra omits it
// in maxes, my_kvsname and barrier_out.
func (r reply) check(sent, want string) error {
	if r.cmd != want {
		return fmt.Errorf("%w: reply to cmd=%s: expected cmd=%s, got cmd=%s", ErrProtocol, sent, want, clip(r.cmd))
	}
	rc, ok := r.fields["rc"]
	if !ok || rc == "0" {
		return nil
	}
	n, err := strconv.Atoi(rc)
	if err != nil {
		return fmt.Errorf("%w: reply to cmd=%s: rc=%q is not an integer", ErrProtocol, sent, clip(rc))
	}
	if n == 0 {
		return nil
	}
	return &Error{Cmd: sent, RC: n, Msg: r.fields["msg"]}
}

// need returns field key of r or a protocol error naming the command.
func (r reply) need(sent, key string) (string, error) {
	v, ok := r.fields[key]
	if !ok {
		return "", fmt.Errorf("%w: reply cmd=%s to cmd=%s lacks field %s=", ErrProtocol, r.cmd, sent, key)
	}
	return v, nil
}

// needInt is need for a decimal integer field.
func (r reply) needInt(sent, key string) (int, error) {
	v, err := r.need(sent, key)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("%w: reply cmd=%s to cmd=%s: %s=%q is not an integer", ErrProtocol, r.cmd, sent, key, clip(v))
	}
	return n, nil
}

// clip shortens s for an error message, so that a megabyte of garbage does
// not end up in a log line.
func clip(s string) string {
	const max = 80
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}
