package bench

import (
	"unsafe"

	"github.com/weft-mpi/weft/mpi"
)

// page is the alignment of Buffer, as OSU's benchmarks align theirs.
const page = 4096

// Buffer returns n zeroed elements of a rank's own: they start on a page boundary and
// share no cache line with another allocation. Go packs small allocations together,
// so two ranks of one process often got 8-byte buffers on one line, and each rank's
// write to its own buffer then took the line from the other: a cost of the
// benchmark's allocation, not of the library, and one that the C twins, whose ranks
// are processes, never pay.
func Buffer[T mpi.Elem](n int) []T {
	size := int(unsafe.Sizeof(*new(T)))
	raw := make([]byte, n*size+2*page)
	off := int(-uintptr(unsafe.Pointer(unsafe.SliceData(raw))) & (page - 1))
	return unsafe.Slice((*T)(unsafe.Pointer(&raw[off])), n)
}
