//go:build !unix

package launch

import (
	"errors"
	"net"
	"os"
	"syscall"
)

// errNoUnix: local procs need socketpair(2) and process groups.
var errNoUnix = errors.New("weft run needs a Unix system")

func socketpair() (net.Conn, *os.File, error) { return nil, nil, errNoUnix }

func signalGroup(p *os.Process, sig syscall.Signal) error {
	if sig == syscall.SIGKILL {
		return p.Kill()
	}
	return errNoUnix
}

func procAttr() *syscall.SysProcAttr { return nil }

func awaitExit(pid int) bool { return false }
