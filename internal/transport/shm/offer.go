package shm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"

	"github.com/weft-mpi/weft/internal/shmem"
)

// The upgrade of a Unix domain socket, right after the procs' handshake. The
// dialer sends an offer of offerSize bytes, offerMagic and the ring size (uint32,
// little endian), with the segment's descriptor attached; a size of 0 and no
// descriptor offer nothing (the dialer could not make a segment). The other
// side answers one byte: answerYes (it mapped the segment: from now on the
// socket is the doorbell) or answerNo (the socket carries the stream as before).
const (
	offerMagic = "WSHM"
	offerSize  = 8
	answerYes  = 'Y'
	answerNo   = 'N'
)

// ErrOffer: the peer's offer or answer breaks the upgrade protocol.
var ErrOffer = errors.New("shm: bad upgrade message")

func encodeOffer(size int) []byte {
	b := make([]byte, offerSize)
	copy(b, offerMagic)
	binary.LittleEndian.PutUint32(b[4:], uint32(size))
	return b
}

// ValidRing says whether rings of size bytes may be offered: a power of two in
// [MinRing, MaxRing].
func ValidRing(size int) bool {
	return size >= MinRing && size <= MaxRing && size&(size-1) == 0
}

// parseOffer returns the ring size an offer names: 0 (no segment), or a valid one.
func parseOffer(b []byte) (int, error) {
	if len(b) != offerSize || string(b[:4]) != offerMagic {
		return 0, fmt.Errorf("%w: offer %q, want %q and a size", ErrOffer, b, offerMagic)
	}
	size := int(binary.LittleEndian.Uint32(b[4:]))
	if size != 0 && !ValidRing(size) {
		return 0, fmt.Errorf("%w: ring of %d bytes, want 0 or a power of two in [%d, %d]", ErrOffer, size, MinRing, MaxRing)
	}
	return size, nil
}

// Offer is the dialer's side of the upgrade: it makes a segment whose rings
// hold size bytes each and offers it on uc (size 0: it offers nothing, and the
// peer must still be told so). It returns a *Conn if the peer took the segment,
// else uc itself (no segment was offered, or it could not be made or mapped), to
// go on with. The caller bounds it with uc's deadline.
func Offer(uc *net.UnixConn, size int) (net.Conn, error) {
	if size != 0 && !ValidRing(size) {
		return nil, fmt.Errorf("shm: cannot offer rings of %d bytes", size)
	}
	var seg *shmem.Segment
	var f *os.File
	if size > 0 {
		var err error
		if seg, f, err = shmem.Create(segmentSize(size)); err != nil {
			size = 0 // offer nothing
		}
	}
	err := sendWithFile(uc, encodeOffer(size), f)
	if f != nil {
		f.Close() // the peer holds its own descriptor now
	}
	var answer [1]byte
	if err == nil {
		_, err = io.ReadFull(uc, answer[:])
	}
	switch {
	case err != nil:
	case answer[0] == answerYes && seg != nil:
		return newConn(uc, seg, size, true), nil
	case answer[0] == answerNo:
		err = nil
	default:
		err = fmt.Errorf("%w: answer %q to an offer of %d bytes", ErrOffer, answer[0], size)
	}
	if seg != nil {
		_ = seg.Unmap()
	}
	if err != nil {
		return nil, err
	}
	return uc, nil
}

// Answer is the other side of the upgrade: it reads the dialer's offer on uc
// and returns a *Conn if take allows it and it could map the segment, else uc
// itself. The caller bounds it with uc's deadline.
func Answer(uc *net.UnixConn, take bool) (net.Conn, error) {
	var b [offerSize]byte
	files, err := readWithFiles(uc, b[:])
	if err != nil {
		return nil, err
	}
	defer closeAll(files)
	size, err := parseOffer(b[:])
	if err != nil {
		return nil, err
	}
	if want := min(size, 1); len(files) != want {
		return nil, fmt.Errorf("%w: an offer of %d bytes came with %d descriptors, want %d", ErrOffer, size, len(files), want)
	}
	var seg *shmem.Segment
	if size > 0 && take {
		seg, _ = shmem.Map(files[0], segmentSize(size)) // nil: decline, keep the socket
	}
	answer := byte(answerNo)
	if seg != nil {
		answer = answerYes
	}
	if _, err := uc.Write([]byte{answer}); err != nil {
		if seg != nil {
			_ = seg.Unmap()
		}
		return nil, err
	}
	if seg == nil {
		return uc, nil
	}
	return newConn(uc, seg, size, false), nil
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}
