package shm

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// sendWithFile writes b on uc with f's descriptor attached (nil: none).
func sendWithFile(uc *net.UnixConn, b []byte, f *os.File) error {
	var oob []byte
	if f != nil {
		oob = unix.UnixRights(int(f.Fd()))
	}
	n, _, err := uc.WriteMsgUnix(b, oob, nil)
	if err == nil && n < len(b) {
		err = fmt.Errorf("shm: short write of %d bytes out of %d", n, len(b))
	}
	return err
}

// maxFiles is how many descriptors a read makes room for: more than the one an
// offer may carry, so that a peer sending several is caught (and all are closed).
const maxFiles = 4

// readWithFiles fills b from uc and returns the descriptors that came with it.
func readWithFiles(uc *net.UnixConn, b []byte) ([]*os.File, error) {
	oob := make([]byte, unix.CmsgSpace(4*maxFiles))
	n, oobn, flags, _, err := uc.ReadMsgUnix(b, oob)
	var files []*os.File
	if oobn > 0 {
		msgs, perr := unix.ParseSocketControlMessage(oob[:oobn])
		for _, m := range msgs {
			fds, ferr := unix.ParseUnixRights(&m)
			for _, fd := range fds {
				files = append(files, os.NewFile(uintptr(fd), "weft-shm"))
			}
			perr = errors.Join(perr, ferr)
		}
		if perr != nil {
			closeAll(files)
			return nil, fmt.Errorf("shm: control message: %w", perr)
		}
	}
	if err == nil && flags&unix.MSG_CTRUNC != 0 {
		err = fmt.Errorf("shm: more than %d descriptors came with the offer", maxFiles)
	}
	if err == nil && n < len(b) {
		_, err = io.ReadFull(uc, b[n:])
	}
	if err != nil {
		closeAll(files)
		return nil, err
	}
	return files, nil
}
