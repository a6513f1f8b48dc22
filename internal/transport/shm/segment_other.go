//go:build !linux

package shm

import (
	"io"
	"net"
	"os"

	"github.com/weft-mpi/weft/internal/shmem"
)

// sendWithFile writes b on uc. Elsewhere there are no segments
// (shmem.ErrUnsupported): an offer says so, and the procs keep their socket.
func sendWithFile(uc *net.UnixConn, b []byte, f *os.File) error {
	if f != nil {
		return shmem.ErrUnsupported
	}
	_, err := uc.Write(b)
	return err
}

func readWithFiles(uc *net.UnixConn, b []byte) ([]*os.File, error) {
	_, err := io.ReadFull(uc, b)
	return nil, err
}
