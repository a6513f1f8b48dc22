//go:build !linux

package shm

import (
	"errors"
	"io"
	"net"
	"os"
)

// Elsewhere there are no segments: an offer says so, and the procs keep their socket.
var errUnsupported = errors.New("shm: shared-memory segments need Linux")

type segment struct{ mem []byte }

func createSegment(int) (*segment, *os.File, error) { return nil, nil, errUnsupported }
func mapSegment(*os.File, int) (*segment, error)    { return nil, errUnsupported }
func (s *segment) unmap() error                     { return nil }

func sendWithFile(uc *net.UnixConn, b []byte, f *os.File) error {
	if f != nil {
		return errUnsupported
	}
	_, err := uc.Write(b)
	return err
}

func readWithFiles(uc *net.UnixConn, b []byte) ([]*os.File, error) {
	_, err := io.ReadFull(uc, b)
	return nil, err
}
