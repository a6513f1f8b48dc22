package coll

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weft-mpi/weft/internal/errs"
)

// matmul multiplies 2x2 byte matrices (mod 256), inout = in x inout: associative
// but not commutative, so the result shows the order in which ranks were folded.
func matmul(in, inout []byte) {
	for i := 0; i+4 <= len(inout); i += 4 {
		a, b := in[i:i+4], inout[i:i+4]
		b[0], b[1], b[2], b[3] = a[0]*b[0]+a[1]*b[2], a[0]*b[1]+a[1]*b[3], a[2]*b[0]+a[3]*b[2], a[2]*b[1]+a[3]*b[3]
	}
}

// matrix is rank r's contribution: a matrix that commutes with no other rank's.
func matrix(r int) []byte { return []byte{byte(r + 1), 1, 1, 0} }

// inOrder is the product of the ranks' matrices in rank order.
func inOrder(n int) []byte {
	acc := matrix(n - 1)
	for r := n - 2; r >= 0; r-- {
		matmul(matrix(r), acc)
	}
	return acc
}

// reduceAll runs a Reduce on n ranks, rank r contributing send(r); first, if not
// negative, calls first and the others wait until it has joined. It returns the
// root's recv and every rank's error.
func reduceAll(c *Comm, n, root, first int, send func(r int) []byte, inPlace bool) ([]byte, []error) {
	errs := make([]error, n)
	var recv []byte
	var wg sync.WaitGroup
	joined := c.ranks[max(first, 0)].seq.Load()
	for r := range n {
		wg.Go(func() {
			if first >= 0 && r != first {
				for c.ranks[first].seq.Load() == joined {
					time.Sleep(time.Millisecond)
				}
			}
			s, out := send(r), []byte(nil)
			if r == root {
				out = make([]byte, len(s))
				if inPlace {
					copy(out, s)
					s = out
				}
				recv = out
			}
			errs[r] = c.Reduce(r, s, out, 4, matmul, root)
		})
	}
	wg.Wait()
	return recv, errs
}

// TestReduceSmall: a small Reduce folds in rank order at any root, in place or not.
func TestReduceSmall(t *testing.T) {
	const n = 4
	c := New(NewJob(), n, 0)
	for _, inPlace := range []bool{false, true} {
		for root := range n {
			got, errs := reduceAll(c, n, root, -1, matrix, inPlace)
			for r, err := range errs {
				if err != nil {
					t.Fatalf("root %d, in place %v: rank %d: %v", root, inPlace, r, err)
				}
			}
			if want := inOrder(n); string(got) != string(want) {
				t.Errorf("root %d, in place %v: got %v, want %v", root, inPlace, got, want)
			}
		}
	}
}

// TestReduceSmallLengths: the root of a small Reduce whose ranks' lengths differ
// gets ErrCount naming a rank whose length is not the root's, whether that rank made
// the episode or came later, and the communicator goes on working.
func TestReduceSmallLengths(t *testing.T) {
	const n, root, bad = 4, 1, 2
	c := New(NewJob(), n, 0)
	for _, first := range []int{bad, root} {
		_, outcomes := reduceAll(c, n, root, first, func(r int) []byte {
			if r == bad {
				return make([]byte, 12)
			}
			return make([]byte, 8)
		}, false)
		var e *errs.Error
		if err := outcomes[root]; !errors.As(err, &e) || e.Class != errs.Count || e.Peer != bad ||
			!strings.Contains(e.Detail, "the root has 2 elements, rank 2 has 3") {
			t.Errorf("%d made the episode: the root returned %v, want ErrCount naming rank %d", first, err, bad)
		}
		got, again := reduceAll(c, n, root, -1, matrix, false)
		for r, err := range again {
			if err != nil {
				t.Fatalf("after the error, rank %d: %v", r, err)
			}
		}
		if want := inOrder(n); string(got) != string(want) {
			t.Fatalf("after the error, got %v, want %v", got, want)
		}
	}
}

// TestRingStress: ranks racing through many small broadcasts and reductions, with
// the ring's slots made, replaced and their episodes reused all the while, each
// get every value of every call.
func TestRingStress(t *testing.T) {
	const n = 4
	rounds := 100 * ringSize
	if testing.Short() {
		rounds = 4 * ringSize
	}
	c := New(NewJob(), n, 0)
	fails := make(chan error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			for i := range rounds {
				root := 0 // the root runs a lap ahead, waits for a slot, and races the others to make it
				if i >= rounds/2 {
					root = (i / 3) % n // runs of three calls with one root, as TMPI's combo
				}
				buf := []byte{byte(r), byte(i)}
				if r == root {
					buf[0] = byte(i * 7)
				}
				if err := c.Bcast(r, buf, 1, root); err != nil || buf[0] != byte(i*7) || buf[1] != byte(i) {
					fails <- fmt.Errorf("Bcast %d: rank %d got %v (%v), want [%d %d]", i, r, buf, err, byte(i*7), byte(i))
					return
				}
				if i < rounds/2 {
					continue // broadcasts alone: the root runs ahead
				}
				out := make([]byte, 1)
				if err := c.Reduce(r, []byte{byte(i + r)}, out, 1, sum, root); err != nil {
					fails <- fmt.Errorf("Reduce %d: rank %d: %v", i, r, err)
					return
				}
				if want := byte(n*i + n*(n-1)/2); r == root && out[0] != want {
					fails <- fmt.Errorf("Reduce %d: got %d, want %d", i, out[0], want)
					return
				}
			}
		})
	}
	wg.Wait()
	close(fails)
	for err := range fails {
		t.Fatal(err)
	}
}

func sum(in, inout []byte) {
	for i := range inout {
		inout[i] += in[i]
	}
}
