package mpi

import "testing"

// onHeap keeps TestViewEmpty's buffer on the heap, where checkptr knows its bounds.
var onHeap []byte

// TestViewEmpty: an empty buffer that ends its allocation views as no elements,
// and MinLoc on such buffers does nothing. Converting its pointer to a wider
// element type would straddle the end of the allocation, which checkptr (on
// under -race) stops the process for: a cross-proc Reduce of empty buffers met it.
func TestViewEmpty(t *testing.T) {
	onHeap = make([]byte, 12)
	end := onHeap[12:]
	if v := view[Pair[float64, int]](end); len(v) != 0 {
		t.Fatalf("view of an empty buffer has %d elements", len(v))
	}
	if a, b := views[Pair[float64, int]](end, end); len(a)+len(b) != 0 {
		t.Fatalf("views of empty buffers have %d and %d elements", len(a), len(b))
	}
	loc[float64, int](end, end, -1)
}
