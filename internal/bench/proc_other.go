//go:build !unix

package bench

import (
	"os"
	"syscall"
)

// newGroup is nil where there are no process groups.
func newGroup() *syscall.SysProcAttr { return nil }

// killGroup kills p alone where there are no process groups.
func killGroup(p *os.Process) { p.Kill() }
