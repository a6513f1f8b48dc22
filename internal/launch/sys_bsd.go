//go:build unix && !linux

package launch

import "syscall"

// procAttr starts a proc in a process group of its own, so that a signal can
// reach everything it starts.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// awaitExit would wait for pid to exit without reaping it; these systems do
// not offer it to the syscall package, so a proc's leftovers are not looked
// for (false).
func awaitExit(pid int) bool { return false }
