package shm

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// segment is a shared mapping: anonymous memory (memfd) that lives as long as a
// proc maps it or holds its file, so no file is left behind by a proc that dies.
type segment struct {
	mem []byte
}

// createSegment makes a segment of n bytes and returns it with its file, which
// the caller passes to the peer and closes.
func createSegment(n int) (*segment, *os.File, error) {
	fd, err := unix.MemfdCreate("weft-shm", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, nil, fmt.Errorf("shm: memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), "weft-shm")
	if err := f.Truncate(int64(n)); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("shm: sizing the segment: %w", err)
	}
	if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, sealed); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("shm: sealing the segment: %w", err)
	}
	s, err := mapSegment(f, n)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return s, f, nil
}

// sealed are the seals of a segment's file: nobody may resize it, so a peer can
// never make our accesses to the mapping fault (a shrunk file would, SIGBUS).
const sealed = unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_SEAL

// mapSegment maps the file f of a segment that must be n bytes long and sealed.
func mapSegment(f *os.File, n int) (*segment, error) {
	seals, err := unix.FcntlInt(f.Fd(), unix.F_GET_SEALS, 0)
	if err != nil {
		return nil, fmt.Errorf("shm: the segment's seals: %w", err)
	}
	if seals&sealed != sealed {
		return nil, fmt.Errorf("shm: segment not sealed against resizing (seals %#x)", seals)
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("shm: stat of the segment: %w", err)
	}
	if fi.Size() != int64(n) {
		return nil, fmt.Errorf("shm: segment of %d bytes, want %d", fi.Size(), n)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("shm: mmap of the segment: %w", err)
	}
	return &segment{mem: mem}, nil
}

func (s *segment) unmap() error {
	if s.mem == nil {
		return nil
	}
	err := unix.Munmap(s.mem)
	s.mem = nil
	return err
}

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
