package launch

import (
	"syscall"
	"unsafe"
)

// procAttr starts a proc in a process group of its own, so that a signal can
// reach everything it starts, and with SIGKILL as its parent-death signal, so
// that even a launcher killed outright leaves no local proc behind. The death
// signal follows the thread that started the proc, not the process: job.run
// starts every proc from one goroutine locked to its thread until the job ends.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// awaitExit blocks until process pid has exited, without reaping it (waitid
// with WNOWAIT), and reports whether it has. Until it is reaped its pid, and
// so its process group id, cannot be taken by another process: the rest of
// its group can be signalled without hitting a stranger.
func awaitExit(pid int) bool {
	const pPID, wNOWAIT = 1, 0x1000000
	var info [128]byte // a siginfo_t, not read
	for {
		_, _, e := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid),
			uintptr(unsafe.Pointer(&info[0])), syscall.WEXITED|wNOWAIT, 0, 0)
		if e != syscall.EINTR {
			return e == 0
		}
	}
}
