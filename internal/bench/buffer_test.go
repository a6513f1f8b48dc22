package bench

import (
	"testing"
	"unsafe"
)

// TestBuffer checks that a buffer starts on a page of its own, whatever its element
// type: two ranks' small buffers never share a cache line.
func TestBuffer(t *testing.T) {
	for _, n := range []int{0, 1, 8, 4096, 5000} {
		a, b := Buffer[byte](n), Buffer[complex128](n)
		if len(a) != n || cap(a) != n || len(b) != n || cap(b) != n {
			t.Fatalf("Buffer(%d): lengths %d and %d, capacities %d and %d", n, len(a), len(b), cap(a), cap(b))
		}
		pa, pb := uintptr(unsafe.Pointer(unsafe.SliceData(a))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
		if pa%page != 0 || pb%page != 0 || pa/64 == pb/64 {
			t.Fatalf("Buffer(%d): buffers at %#x and %#x, want each on a page of its own", n, pa, pb)
		}
		for i := range b {
			if b[i] != 0 {
				t.Fatalf("Buffer(%d)[%d] = %v, want zero", n, i, b[i])
			}
		}
	}
}
