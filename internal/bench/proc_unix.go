//go:build unix

package bench

import (
	"os"
	"syscall"
)

// newGroup starts a process as the leader of a new process group.
func newGroup() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// killGroup kills the group p leads: p and whatever it started.
func killGroup(p *os.Process) { syscall.Kill(-p.Pid, syscall.SIGKILL) }
