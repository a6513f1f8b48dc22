package mpi

import (
	"bytes"
	"math"
	"reflect"
	"slices"
	"testing"
)

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

// TestFusedFolds: the fused fold of Sum, Prod, Min and Max computes, on every kind
// they are defined on, into another buffer or in place in d, the bytes that their
// kernel's folds of c, b, then a into d do (NaNs, signed zeros, infinities and
// wrapping integers included), and leaves what lies past out alone.
func TestFusedFolds(t *testing.T) {
	checkFused[int](t, func(i int) int { return i*0x3fffffffffff - 7 })
	checkFused[int8](t, func(i int) int8 { return int8(i*37 - 100) })
	checkFused[int16](t, func(i int) int16 { return int16(i*7919 - 3) })
	checkFused[int32](t, func(i int) int32 { return int32(i*1_000_003 - 9) })
	checkFused[int64](t, func(i int) int64 { return int64(i) * -0x7fffffffff })
	checkFused[uint](t, func(i int) uint { return uint(i) * 0x9e3779b97f4a7c15 })
	checkFused[uint8](t, func(i int) uint8 { return uint8(i * 151) })
	checkFused[uint16](t, func(i int) uint16 { return uint16(i * 40503) })
	checkFused[uint32](t, func(i int) uint32 { return uint32(i) * 2654435761 })
	checkFused[uint64](t, func(i int) uint64 { return uint64(i) * 0x9e3779b97f4a7c15 })
	checkFused[uintptr](t, func(i int) uintptr { return uintptr(i * 977) })
	// Specials now and then, else values of many magnitudes, whose sums and
	// products round differently in another order.
	specials := []float64{math.NaN(), math.Copysign(0, -1), 0, math.Inf(1), math.Inf(-1), 1e308, -1e-308}
	real := func(i int) float64 {
		if i%4 == 0 {
			return specials[i/4%len(specials)]
		}
		return float64(i%17-8)*math.Pow(10, float64(i%9-4)) + 0.1
	}
	checkFused[float32](t, func(i int) float32 { return float32(real(i)) })
	checkFused[float64](t, real)
	checkFused[complex64](t, func(i int) complex64 { return complex(float32(real(i)), float32(real(i+5))) })
	checkFused[complex128](t, func(i int) complex128 { return complex(real(i), real(i+7)) })
}

// checkFused is TestFusedFolds on elements of T, made by gen: vectors of 0 to 9
// elements, so that the NaNs and zeros meet every other value in every place.
func checkFused[T Reducible](t *testing.T, gen func(i int) T) {
	t.Helper()
	k := reflect.TypeFor[T]().Kind()
	for _, op := range []Op{Sum, Prod, Min, Max} {
		fold, fused := op.d.kernels[k], op.d.fused[k]
		if fold == nil {
			continue // Min and Max on complex
		}
		if fused == nil {
			t.Fatalf("%v on %v has no fused fold", op, k)
		}
		for n := range 10 {
			vec := func(seed int) []T {
				v := make([]T, n+1) // one past inout: must stay as it is
				for i := range v {
					v[i] = gen(seed*11 + i*3)
				}
				return v
			}
			a, b, c, d := vec(1), vec(2), vec(3), vec(4)
			want := slices.Clone(d)
			fold(raw(c[:n]), raw(want[:n]))
			fold(raw(b[:n]), raw(want[:n]))
			fold(raw(a[:n]), raw(want[:n]))
			got, inPlace := vec(5), slices.Clone(d)
			got[n] = d[n]
			fused(raw(a[:n]), raw(b[:n]), raw(c[:n]), raw(d[:n]), raw(got[:n]))
			fused(raw(a[:n]), raw(b[:n]), raw(c[:n]), raw(inPlace[:n]), raw(inPlace[:n]))
			if !bytes.Equal(raw(got), raw(want)) || !bytes.Equal(raw(inPlace), raw(want)) {
				t.Fatalf("%v on %v, %d elements: fused %v, in place %v, three folds %v", op, k, n, got, inPlace, want)
			}
		}
	}
}
