//go:build unix

package launch

import (
	"net"
	"os"
	"syscall"
)

// socketpair returns a connected pair of Unix stream sockets: the launcher's
// end as a net.Conn, and the proc's end as a file to pass it (close-on-exec,
// so that only the proc it is given to inherits it).
func socketpair() (net.Conn, *os.File, error) {
	// Under ForkLock, as the os package makes its pipes: no fork can copy
	// the descriptors before they are close-on-exec.
	syscall.ForkLock.RLock()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err == nil {
		syscall.CloseOnExec(fds[0])
		syscall.CloseOnExec(fds[1])
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return nil, nil, os.NewSyscallError("socketpair", err)
	}
	ours := os.NewFile(uintptr(fds[0]), "pmi")
	defer ours.Close() // FileConn holds its own duplicate
	c, err := net.FileConn(ours)
	if err != nil {
		syscall.Close(fds[1])
		return nil, nil, err
	}
	return c, os.NewFile(uintptr(fds[1]), "PMI_FD"), nil
}

// signalGroup sends sig to the process group p leads (every proc and rsh
// command is started as the leader of a group of its own), so that whatever
// it started gets the signal too.
func signalGroup(p *os.Process, sig syscall.Signal) error {
	return syscall.Kill(-p.Pid, sig)
}
