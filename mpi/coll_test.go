package mpi_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weft-mpi/weft/mpi"
)

var (
	collSizes = []int{1, 2, 3, 4, 16}
	vecSizes  = []int{0, 1, 7, 1000, 100000}
)

// contrib is rank r's contribution in round k: small values so that products and
// sums stay exact in every type.
func contrib[T mpi.Elem](conv func(int) T, r, k, n int) []T {
	v := make([]T, n)
	for i := range v {
		v[i] = conv((r*7 + i*3 + k) % 5)
	}
	return v
}

// refReduce folds the contributions as Weft documents: x0 op (x1 op (... op xn-1)).
func refReduce[T mpi.Elem](xs [][]T, op func(a, b T) T) []T {
	acc := slices.Clone(xs[len(xs)-1])
	for r := len(xs) - 2; r >= 0; r-- {
		for i := range acc {
			acc[i] = op(xs[r][i], acc[i])
		}
	}
	return acc
}

type namedOp[T mpi.Elem] struct {
	op  mpi.Op
	ref func(a, b T) T
}

func b2i[T interface {
	~int8 | ~int32 | ~int64 | ~uint16
}](v bool) T {
	if v {
		return 1
	}
	return 0
}

func intOps[T ~int8 | ~int32 | ~int64 | ~uint16]() []namedOp[T] {
	return []namedOp[T]{
		{mpi.Sum, func(a, b T) T { return a + b }},
		{mpi.Prod, func(a, b T) T { return a * b }},
		{mpi.Min, func(a, b T) T { return min(a, b) }},
		{mpi.Max, func(a, b T) T { return max(a, b) }},
		{mpi.Land, func(a, b T) T { return b2i[T](a != 0 && b != 0) }},
		{mpi.Lor, func(a, b T) T { return b2i[T](a != 0 || b != 0) }},
		{mpi.Lxor, func(a, b T) T { return b2i[T]((a != 0) != (b != 0)) }},
		{mpi.Band, func(a, b T) T { return a & b }},
		{mpi.Bor, func(a, b T) T { return a | b }},
		{mpi.Bxor, func(a, b T) T { return a ^ b }},
	}
}

func floatOps[T ~float32 | ~float64]() []namedOp[T] {
	return []namedOp[T]{
		{mpi.Sum, func(a, b T) T { return a + b }},
		{mpi.Prod, func(a, b T) T { return a * b }},
		{mpi.Min, func(a, b T) T { return min(a, b) }},
		{mpi.Max, func(a, b T) T { return max(a, b) }},
	}
}

// checkReductions runs Reduce (root 0, the last rank, and rotating over repeated
// calls) and Allreduce (in place and not) for every op, and compares with refReduce.
func checkReductions[T mpi.Elem](t *testing.T, conv func(int) T, ops []namedOp[T]) {
	for _, n := range collSizes {
		for _, size := range vecSizes {
			if n == 16 && size == 100000 {
				size = 20000 // keeps the whole package under a minute with -race
			}
			t.Run(fmt.Sprintf("ranks=%d/len=%d", n, size), func(t *testing.T) {
				// Inputs and results, made once: the ranks only read them.
				inputs := make([][][]T, len(ops))
				wants := make([][]T, len(ops))
				for k, o := range ops {
					inputs[k] = make([][]T, n)
					for r := range n {
						inputs[k][r] = contrib(conv, r, k, size)
					}
					wants[k] = refReduce(inputs[k], o.ref)
				}
				mustRun(t, n, func(c *mpi.Comm) error {
					for k, o := range ops {
						want := wants[k]
						mine := inputs[k][c.Rank()]
						orig := slices.Clone(mine)
						roots := []int{0, n - 1, k % n}
						for call, root := range roots {
							recv := make([]T, size)
							if err := mpi.Reduce(c, mine, recv, o.op, root); err != nil {
								return err
							}
							if c.Rank() == root && !slices.Equal(recv, want) {
								return fmt.Errorf("Reduce %v root %d (call %d): got %v..., want %v...", o.op, root, call, head(recv), head(want))
							}
							if !slices.Equal(mine, orig) {
								return fmt.Errorf("Reduce %v modified the send buffer", o.op)
							}
						}
						// In place at the root.
						root := (k + 1) % n
						var recv []T
						send := mine
						if c.Rank() == root {
							recv, send = slices.Clone(mine), nil
						}
						if err := mpi.Reduce(c, send, recv, o.op, root); err != nil {
							return err
						}
						if c.Rank() == root && !slices.Equal(recv, want) {
							return fmt.Errorf("Reduce in place %v root %d: got %v..., want %v...", o.op, root, head(recv), head(want))
						}
						all := make([]T, size)
						if err := mpi.Allreduce(c, mine, all, o.op); err != nil {
							return err
						}
						if !slices.Equal(all, want) || !slices.Equal(mine, orig) {
							return fmt.Errorf("Allreduce %v: got %v..., want %v...", o.op, head(all), head(want))
						}
						inplace := slices.Clone(mine)
						if err := mpi.Allreduce(c, nil, inplace, o.op); err != nil {
							return err
						}
						if !slices.Equal(inplace, want) {
							return fmt.Errorf("Allreduce in place %v: got %v..., want %v...", o.op, head(inplace), head(want))
						}
					}
					return nil
				})
			})
		}
	}
}

func head[T any](s []T) []T { return s[:min(len(s), 8)] }

func TestReduceInt8(t *testing.T) {
	checkReductions(t, func(v int) int8 { return int8(v) }, intOps[int8]())
}
func TestReduceInt32(t *testing.T) {
	checkReductions(t, func(v int) int32 { return int32(v) }, intOps[int32]())
}
func TestReduceInt64(t *testing.T) {
	checkReductions(t, func(v int) int64 { return int64(v) - 2 }, intOps[int64]())
}
func TestReduceUint16(t *testing.T) {
	checkReductions(t, func(v int) uint16 { return uint16(v) }, intOps[uint16]())
}
func TestReduceFloat32(t *testing.T) {
	checkReductions(t, func(v int) float32 { return float32(v) * 0.5 }, floatOps[float32]())
}
func TestReduceFloat64(t *testing.T) {
	checkReductions(t, func(v int) float64 { return float64(v)*0.1 - 0.2 }, floatOps[float64]())
}
func TestReduceComplex128(t *testing.T) {
	checkReductions(t, func(v int) complex128 { return complex(float64(v), float64(v%3)-1) }, []namedOp[complex128]{
		{mpi.Sum, func(a, b complex128) complex128 { return a + b }},
		{mpi.Prod, func(a, b complex128) complex128 { return a * b }},
	})
}
func TestReduceBool(t *testing.T) {
	checkReductions(t, func(v int) bool { return v%2 == 1 }, []namedOp[bool]{
		{mpi.Land, func(a, b bool) bool { return a && b }},
		{mpi.Lor, func(a, b bool) bool { return a || b }},
		{mpi.Lxor, func(a, b bool) bool { return a != b }},
	})
}

// The 2x2 integer matrices of the non-commutative tests, packed as four int16 in an
// int64: matMul is their product (entries mod 2^16), matOp the user op applying it,
// whose result is right only in rank order.
func matPack(m [4]int64) int64 {
	return m[0]&0xffff | (m[1]&0xffff)<<16 | (m[2]&0xffff)<<32 | (m[3]&0xffff)<<48
}

func matUnpack(v int64) [4]int64 {
	return [4]int64{int64(int16(v)), int64(int16(v >> 16)), int64(int16(v >> 32)), int64(int16(v >> 48))}
}

func matMul(a, b int64) int64 {
	x, y := matUnpack(a), matUnpack(b)
	return matPack([4]int64{x[0]*y[0] + x[1]*y[2], x[0]*y[1] + x[1]*y[3], x[2]*y[0] + x[3]*y[2], x[2]*y[1] + x[3]*y[3]})
}

var matOp = mpi.NewOp(func(in, inout []int64) {
	for i := range inout {
		inout[i] = matMul(in[i], inout[i])
	}
}, false)

// TestReduceNonCommutative multiplies 2x2 integer matrices (4 int64 per element
// would need a struct; here each element is one matrix packed as four int16 in an
// int64): the product is right only in rank order.
func TestReduceNonCommutative(t *testing.T) {
	for _, n := range collSizes {
		for _, size := range []int{1, 7, 5000} {
			t.Run(fmt.Sprintf("ranks=%d/len=%d", n, size), func(t *testing.T) {
				mustRun(t, n, func(c *mpi.Comm) error {
					xs := make([][]int64, n)
					for r := range xs {
						xs[r] = make([]int64, size)
						for i := range xs[r] {
							xs[r][i] = matPack([4]int64{1, int64(r + i%3), 0, 1 + int64(r%2)})
						}
					}
					want := make([]int64, size)
					for i := range want { // left to right, as a loop would
						acc := xs[0][i]
						for r := 1; r < n; r++ {
							acc = matMul(acc, xs[r][i])
						}
						want[i] = acc
					}
					for _, root := range []int{0, n - 1} {
						recv := make([]int64, size)
						if err := mpi.Reduce(c, xs[c.Rank()], recv, matOp, root); err != nil {
							return err
						}
						if c.Rank() == root && !slices.Equal(recv, want) {
							return fmt.Errorf("root %d: product out of rank order", root)
						}
						inplace := slices.Clone(xs[c.Rank()])
						var send []int64 = xs[c.Rank()]
						if c.Rank() == root {
							send = nil
						}
						if err := mpi.Reduce(c, send, inplace, matOp, root); err != nil {
							return err
						}
						if c.Rank() == root && !slices.Equal(inplace, want) {
							return fmt.Errorf("root %d in place: product out of rank order", root)
						}
					}
					all := slices.Clone(xs[c.Rank()])
					if err := mpi.Allreduce(c, nil, all, matOp); err != nil {
						return err
					}
					if !slices.Equal(all, want) {
						return fmt.Errorf("Allreduce in place: product out of rank order")
					}
					return nil
				})
			})
		}
	}
}

// TestBcastPipelines: the root of a small Bcast does not wait for the others, so
// it can run broadcasts ahead of ranks that have not called them yet, and each
// still gets every value in order. (A large one's root waits: TestCollErrors.)
func TestBcastPipelines(t *testing.T) {
	const ahead = 5
	mustRun(t, 3, func(c *mpi.Comm) error {
		if c.Rank() == 0 {
			for i := range ahead {
				if err := mpi.Bcast(c, []int64{int64(i), -int64(i)}, 0); err != nil {
					return err
				}
			}
			for r := 1; r < c.Size(); r++ {
				if err := mpi.Send(c, []byte{1}, r, 9); err != nil {
					return err
				}
			}
			return nil
		}
		if _, err := mpi.Recv(c, make([]byte, 1), 0, 9); err != nil {
			return err
		}
		for i := range ahead {
			buf := []int64{7, 7}
			if err := mpi.Bcast(c, buf, 0); err != nil {
				return err
			}
			if buf[0] != int64(i) || buf[1] != -int64(i) {
				return fmt.Errorf("Bcast %d got %v, want [%d %d]", i, buf, i, -i)
			}
		}
		return nil
	})
}

// TestReducePipelines: the other ranks of a small Reduce leave once their
// contribution is copied, so they can run reductions ahead of a root that has not
// called them yet, which then gets every result, folded in rank order.
func TestReducePipelines(t *testing.T) {
	const ahead = 5
	concat := mpi.NewOp(func(in, inout []int64) {
		for i := range inout {
			inout[i] = in[i]*10 + inout[i]
		}
	}, false)
	mustRun(t, 3, func(c *mpi.Comm) error {
		if c.Rank() != 0 {
			for i := range ahead {
				if err := mpi.Reduce(c, []int64{int64(c.Rank()), int64(i)}, nil, concat, 0); err != nil {
					return err
				}
			}
			return mpi.Send(c, []byte{1}, 0, 9)
		}
		for r := 1; r < c.Size(); r++ {
			if _, err := mpi.Recv(c, make([]byte, 1), r, 9); err != nil {
				return err
			}
		}
		for i := range ahead {
			got := make([]int64, 2)
			if err := mpi.Reduce(c, []int64{0, int64(i)}, got, concat, 0); err != nil {
				return err
			}
			if want := []int64{12, int64(21 * i)}; got[0] != want[0] || got[1] != want[1] {
				return fmt.Errorf("Reduce %d got %v, want %v", i, got, want)
			}
		}
		return nil
	})
}

// TestCollFarAhead: ranks that run many more small collectives ahead than the
// ring holds (the root of Bcasts, the other ranks of Reduces) wait for a slot to
// come free, and every rank still gets every value.
func TestCollFarAhead(t *testing.T) {
	const rounds = 300
	mustRun(t, 4, func(c *mpi.Comm) error {
		if c.Rank() != 0 {
			time.Sleep(20 * time.Millisecond) // rank 0 runs ahead as far as it can
		}
		for i := range rounds {
			buf := []int64{int64(i * c.Rank())}
			if err := mpi.Bcast(c, buf, 0); err != nil {
				return err
			}
			if buf[0] != 0 {
				return fmt.Errorf("Bcast %d got %d, want 0", i, buf[0])
			}
			buf[0] = int64(i + c.Rank())
			if err := mpi.Bcast(c, buf, 0); err != nil {
				return err
			}
			if buf[0] != int64(i) {
				return fmt.Errorf("Bcast %d got %d, want %d", i, buf[0], i)
			}
		}
		if c.Rank() == 0 {
			time.Sleep(20 * time.Millisecond) // now the others run ahead
		}
		for i := range rounds {
			got := make([]int64, 1)
			if err := mpi.Reduce(c, []int64{int64(i + c.Rank())}, got, mpi.Sum, 0); err != nil {
				return err
			}
			if want := int64(4*i + 6); c.Rank() == 0 && got[0] != want {
				return fmt.Errorf("Reduce %d got %d, want %d", i, got[0], want)
			}
		}
		return nil
	})
}

func TestBcast(t *testing.T) {
	for _, n := range collSizes {
		for _, size := range vecSizes {
			t.Run(fmt.Sprintf("ranks=%d/len=%d", n, size), func(t *testing.T) {
				calls := min(2*n, 6) // roots: the last, then rotating
				wants := make([][]float64, calls)
				for call := range wants {
					wants[call] = contrib(func(v int) float64 { return float64(v) + 0.5 }, call, call, size)
				}
				mustRun(t, n, func(c *mpi.Comm) error {
					for call := range calls {
						root := call % n
						if call == 0 {
							root = n - 1
						}
						want := wants[call]
						buf := make([]float64, size)
						if c.Rank() == root {
							copy(buf, want)
						}
						if err := mpi.Bcast(c, buf, root); err != nil {
							return err
						}
						if !slices.Equal(buf, want) {
							return fmt.Errorf("Bcast root %d call %d: got %v..., want %v...", root, call, head(buf), head(want))
						}
					}
					bs := []bool{false, c.Rank() == 0, true}
					if err := mpi.Bcast(c, bs, 0); err != nil {
						return err
					}
					if !slices.Equal(bs, []bool{false, true, true}) {
						return fmt.Errorf("Bcast of bools: %v", bs)
					}
					return nil
				})
			})
		}
	}
}

// TestBarrier checks over many episodes that no rank leaves before all arrived.
func TestBarrier(t *testing.T) {
	for _, n := range []int{2, 3, 16, 17, 300} {
		t.Run(fmt.Sprintf("ranks=%d", n), func(t *testing.T) {
			var arrived atomic.Int64
			mustRun(t, n, func(c *mpi.Comm) error {
				for k := range 200 {
					arrived.Add(1)
					if err := c.Barrier(); err != nil {
						return err
					}
					if got := arrived.Load(); got < int64((k+1)*n) {
						return fmt.Errorf("episode %d: left the barrier with %d arrivals, want at least %d", k, got, (k+1)*n)
					}
					if err := c.Barrier(); err != nil { // nobody arrives at k+1 before all checked k
						return err
					}
				}
				return nil
			})
		})
	}
}

// TestCollDupConcurrent runs two goroutines per rank, each doing collectives on its
// own Dup of the world, at once.
func TestCollDupConcurrent(t *testing.T) {
	for _, n := range []int{2, 4, 16} {
		t.Run(fmt.Sprintf("ranks=%d", n), func(t *testing.T) {
			mustRun(t, n, func(c *mpi.Comm) error {
				var comms [2]*mpi.Comm
				for i := range comms {
					d, err := c.Dup()
					if err != nil {
						return err
					}
					comms[i] = d
				}
				var wg sync.WaitGroup
				errs := make([]error, 2)
				for g := range 2 {
					wg.Go(func() {
						d := comms[g]
						for k := range 300 {
							v := []int64{int64(d.Rank() + g + k)}
							if err := mpi.Allreduce(d, nil, v, mpi.Sum); err != nil {
								errs[g] = err
								return
							}
							if want := int64(n*(n-1)/2 + n*(g+k)); v[0] != want {
								errs[g] = fmt.Errorf("goroutine %d round %d: sum %d, want %d", g, k, v[0], want)
								return
							}
							b := []int{0, 0}
							if d.Rank() == k%n {
								b = []int{k, g}
							}
							if err := mpi.Bcast(d, b, k%n); err != nil {
								errs[g] = err
								return
							}
							if b[0] != k || b[1] != g {
								errs[g] = fmt.Errorf("goroutine %d round %d: Bcast got %v", g, k, b)
								return
							}
							if err := d.Barrier(); err != nil {
								errs[g] = err
								return
							}
						}
					})
				}
				wg.Wait()
				return errors.Join(errs...)
			})
		})
	}
}

// TestCollPanicReleases: a rank that panics instead of joining a collective releases
// the others with ErrProcFailed.
func TestCollPanicReleases(t *testing.T) {
	const n = 17
	colls := []struct {
		name string
		call func(c *mpi.Comm, buf []float64) error
	}{
		{"Barrier", func(c *mpi.Comm, buf []float64) error { return c.Barrier() }},
		{"Bcast", func(c *mpi.Comm, buf []float64) error { return mpi.Bcast(c, buf, 5) }},
		{"Reduce", func(c *mpi.Comm, buf []float64) error {
			return mpi.Reduce(c, buf, make([]float64, len(buf)), mpi.Sum, 0)
		}},
		{"Allreduce", func(c *mpi.Comm, buf []float64) error { return mpi.Allreduce(c, nil, buf, mpi.Sum) }},
		{"Gather", func(c *mpi.Comm, buf []float64) error {
			return mpi.Gather(c, buf[:len(buf)/n], make([]float64, len(buf)), 0)
		}},
		{"Scatter", func(c *mpi.Comm, buf []float64) error {
			return mpi.Scatter(c, buf, make([]float64, len(buf)/n), 5)
		}},
		{"Allgather", func(c *mpi.Comm, buf []float64) error { return mpi.Allgather(c, nil, buf) }},
		{"Alltoall", func(c *mpi.Comm, buf []float64) error { return mpi.Alltoall(c, nil, buf) }},
		{"Scan", func(c *mpi.Comm, buf []float64) error { return mpi.Scan(c, nil, buf, mpi.Sum) }},
		{"ReduceScatterBlock", func(c *mpi.Comm, buf []float64) error {
			return mpi.ReduceScatterBlock(c, nil, buf, mpi.Sum)
		}},
	}
	for _, coll := range colls {
		t.Run(coll.name, func(t *testing.T) {
			var released atomic.Int64
			err := run(t, n, func(c *mpi.Comm) error {
				if c.Rank() == 5 {
					panic("rank 5 gives up")
				}
				if _, e := wantClass(coll.call(c, make([]float64, n*100)), mpi.ErrProcFailed); e != nil {
					return e
				}
				released.Add(1)
				return nil
			})
			if !errors.Is(err, mpi.ErrPanic) || released.Load() != n-1 {
				t.Fatalf("Run: %v; %d ranks released, want %d", err, released.Load(), n-1)
			}
		})
	}
}

func TestCollAbort(t *testing.T) {
	err := run(t, 4, func(c *mpi.Comm) error {
		if c.Rank() == 2 {
			c.Abort(3)
			return nil
		}
		err := c.Barrier()
		if _, e := wantClass(err, mpi.ErrAborted); e != nil {
			return e
		}
		return nil
	})
	if !errors.Is(err, mpi.ErrAborted) {
		t.Fatalf("Run: %v, want ErrAborted", err)
	}
}

// check returns nil if err is of class, else an error saying what it is.
func check(err error, class mpi.Class) error {
	_, e := wantClass(err, class)
	return e
}

func TestCollErrors(t *testing.T) {
	// Local errors: every rank makes the same mistake.
	mustRun(t, 3, func(c *mpi.Comm) error {
		buf := []float64{1}
		for _, e := range []error{
			check(mpi.Bcast(c, buf, 3), mpi.ErrRoot),
			check(mpi.Bcast(c, buf, -1), mpi.ErrRoot),
			check(mpi.Reduce(c, buf, buf, mpi.Sum, 7), mpi.ErrRoot),
			check(mpi.Allreduce(c, []complex128{1}, make([]complex128, 1), mpi.Max), mpi.ErrOp),
			check(mpi.Allreduce(c, []bool{true}, make([]bool, 1), mpi.Sum), mpi.ErrOp),
			check(mpi.Allreduce(c, []float64{1}, make([]float64, 1), mpi.Band), mpi.ErrOp),
			check(mpi.Allreduce(c, []float64{1}, make([]float64, 1), mpi.Op{}), mpi.ErrOp),
			check(mpi.Allreduce(c, []float64{1}, make([]float64, 1), mpi.NewOp(func(in, inout []int64) {}, true)), mpi.ErrOp),
			check(mpi.Allreduce(c, []float64{1, 2}, make([]float64, 1), mpi.Sum), mpi.ErrCount),
			check(mpi.Reduce(c, []float64{1, 2}, make([]float64, 1), mpi.Sum, c.Rank()), mpi.ErrCount),
		} {
			if e != nil {
				return e
			}
		}
		big := make([]float64, 10)
		if e := check(mpi.Allreduce(c, big[2:6], big[4:8], mpi.Sum), mpi.ErrBuffer); e != nil {
			return e
		}
		var nilComm *mpi.Comm
		if e := check(nilComm.Barrier(), mpi.ErrComm); e != nil {
			return e
		}
		d, err := c.Dup()
		if err != nil {
			return err
		}
		d.Free()
		if e := check(mpi.Bcast(d, buf, 0), mpi.ErrComm); e != nil {
			return e
		}
		// The communicator still works after the local errors.
		return c.Barrier()
	})
	// Disagreements between ranks are found inside the collective, and nobody hangs.
	mustRun(t, 3, func(c *mpi.Comm) error {
		// Rank 0 is the root: rank 1 and 2 have more. The root of a large Bcast
		// waits for the others and learns of it; a small one's root may return
		// at once (Bcasts pipeline), but the others always learn of it.
		for _, n := range []int{4096, 4} {
			err := mpi.Bcast(c, make([]int32, n+c.Rank()), 0)
			if c.Rank() == 0 && err == nil && n > 4 {
				return fmt.Errorf("root: Bcast of %d elements with mismatched lengths succeeded", n)
			}
			if c.Rank() != 0 {
				if e := check(err, mpi.ErrCount); e != nil {
					return e
				}
			}
		}
		short := make([]int32, 4-c.Rank())
		err := mpi.Bcast(c, short, 0)
		if c.Rank() != 0 {
			if e := check(err, mpi.ErrTruncate); e != nil {
				return e
			}
		}
		err = mpi.Allreduce(c, make([]int32, 2+c.Rank()%2), make([]int32, 3), mpi.Sum)
		if e := check(err, mpi.ErrCount); e != nil {
			return e
		}
		// Rank 1 names another root. A small Reduce's non-root (rank 2) may have
		// left before rank 1 came; the root and rank 1 always learn of it.
		err = mpi.Reduce(c, make([]int32, 2), make([]int32, 2), mpi.Sum, c.Rank()%2)
		if e := check(err, mpi.ErrRoot); e != nil && (c.Rank() != 2 || err != nil) {
			return e
		}
		if c.Rank() == 0 {
			err = c.Barrier()
		} else {
			err = mpi.Bcast(c, []int32{1}, 1)
		}
		// The Bcast's root (1) may have returned, and rank 2 copied, before rank 0 came.
		if err == nil && c.Rank() == 0 {
			return fmt.Errorf("Barrier against Bcast succeeded")
		}
		return c.Barrier() // and the communicator still works
	})
}

// TestUserOpPanic: a panic in a user op is an ErrOp error on every rank.
func TestUserOpPanic(t *testing.T) {
	bad := mpi.NewOp(func(in, inout []int32) { panic("bad op") }, true)
	mustRun(t, 4, func(c *mpi.Comm) error {
		_, e := wantClass(mpi.Allreduce(c, nil, []int32{1, 2}, bad), mpi.ErrOp)
		if e != nil {
			return e
		}
		return c.Barrier()
	})
}
