package mpi

import (
	"cmp"
	"fmt"
	"reflect"
	"unsafe"

	"github.com/weft-mpi/weft/internal/coll"
	"github.com/weft-mpi/weft/internal/errs"
)

// Op is a reduction operation for Reduce and Allreduce: one of the predefined
// operations below, or one made by NewOp. The zero Op is invalid (ErrOp).
//
// The predefined operations are defined where MPI defines them, on the underlying
// kind of the element type (so a named type such as `type Celsius float64` works):
//
//	Sum, Prod          integers, floats, complex
//	Min, Max           integers, floats (NaN wins, as Go's min and max)
//	Land, Lor, Lxor    integers (non-zero is true; the result is 1 or 0) and bool
//	Band, Bor, Bxor    integers (byte is uint8)
//	MinLoc, MaxLoc     value-index pairs (the Pair types of LocPair)
//
// Using one on another type is an ErrOp error naming the operation and the type.
type Op struct{ d *opDef }

type opDef struct {
	name        string
	commutative bool
	kernels     [reflect.UnsafePointer + 1]func(in, inout []byte)       // predefined: by element kind
	fused       [reflect.UnsafePointer + 1]func(a, b, c, d, out []byte) // Sum, Prod, Min, Max: their coll.Op's Fold3, by element kind
	pairs       map[reflect.Type]func(in, inout []byte)                 // MinLoc, MaxLoc: by pair type
	typ         reflect.Type                                            // NewOp: the element type
	user        func(in, inout []byte)                                  // NewOp: fn on bytes
}

// The predefined operations, as MPI's MPI_SUM, MPI_PROD, ...
var (
	Sum  = predefined("Sum")
	Prod = predefined("Prod")
	Min  = predefined("Min")
	Max  = predefined("Max")
	Land = predefined("Land") // logical and
	Lor  = predefined("Lor")  // logical or
	Lxor = predefined("Lxor") // logical exclusive or
	Band = predefined("Band") // bitwise and
	Bor  = predefined("Bor")  // bitwise or
	Bxor = predefined("Bxor") // bitwise exclusive or

	// MinLoc and MaxLoc reduce value-index pairs to the least (greatest) value and
	// its index; among equal values, the lowest index, as MPI requires. Values are
	// ordered as cmp.Compare orders them: a NaN below every number.
	MinLoc = Op{&opDef{name: "MinLoc", commutative: true, pairs: map[reflect.Type]func(in, inout []byte){}}}
	MaxLoc = Op{&opDef{name: "MaxLoc", commutative: true, pairs: map[reflect.Type]func(in, inout []byte){}}}
)

// Pair is a value and its index, the element of MinLoc and MaxLoc: a rank
// reduces, say, a local minimum and where it lies to the global minimum and where
// that lies. The reductions (Reduce, Allreduce, Scan, Exscan, ReduceScatter,
// ReduceScatterBlock and their nonblocking forms) take the pairs of LocPair.
type Pair[V interface{ integer | float }, I integer] struct {
	Value V
	Index I
}

// LocPair lists the Pair types: MPI's MPI_FLOAT_INT, MPI_DOUBLE_INT, MPI_LONG_INT,
// MPI_2INT and MPI_SHORT_INT with their C layouts (an int32 index), and the same
// values with a Go int index. MPI's MPI_LONG_DOUBLE_INT has no Go twin.
type LocPair interface {
	Pair[float32, int32] | Pair[float64, int32] | Pair[int64, int32] | Pair[int32, int32] | Pair[int16, int32] |
		Pair[float32, int] | Pair[float64, int] | Pair[int64, int] | Pair[int32, int] | Pair[int, int]
}

// Reducible is what the reductions take: the element types, and the pairs of
// MinLoc and MaxLoc.
type Reducible interface{ Elem | LocPair }

func predefined(name string) Op { return Op{&opDef{name: name, commutative: true}} }

// NewOp makes a user-defined operation, as MPI_Op_create: fn(in, inout) must set
// inout[i] = in[i] op inout[i] for every i. op must be associative; when it is not
// commutative, pass false (Weft applies every operation in rank order anyway:
// the result is x0 op (x1 op (... op xn-1))). fn may be called several times on
// pieces of the vectors, and on any rank's goroutine. A panic in fn becomes an
// ErrOp error on every rank of the reduction. The Op works only with []T buffers
// (ErrOp otherwise).
func NewOp[T Reducible](fn func(in, inout []T), commutative bool) Op {
	d := &opDef{name: fmt.Sprintf("NewOp[%v]", reflect.TypeFor[T]()), commutative: commutative, typ: reflect.TypeFor[T]()}
	if fn != nil {
		d.user = func(in, inout []byte) { fn(view[T](in), view[T](inout)) }
	}
	return Op{d}
}

// String names the operation.
func (op Op) String() string {
	if op.d == nil {
		return "Op(zero)"
	}
	return op.d.name
}

// Commutative reports whether the operation is commutative, as MPI_Op_commutative.
func (op Op) Commutative() bool { return op.d != nil && op.d.commutative }

// kernel returns the functions that apply op to buffers of elements of type t:
// its fold, and for Sum, Prod, Min and Max the fused one (see coll.Op).
func (op Op) kernel(t reflect.Type, call string, rank int) (coll.Op, error) {
	d := op.d
	switch {
	case d == nil:
		return coll.Op{}, errs.New(errs.Op, call, rank, "the zero Op is not an operation (use Sum, Max, ... or NewOp)")
	case d.typ != nil && d.typ != t:
		return coll.Op{}, errs.New(errs.Op, call, rank, "%s used with elements of type %v; it works only on %v", d.name, t, d.typ)
	case d.typ != nil && d.user == nil:
		return coll.Op{}, errs.New(errs.Op, call, rank, "%s was made with a nil function", d.name)
	case d.typ != nil:
		return coll.Op{Fold: d.user}, nil
	case d.pairs != nil:
		if f := d.pairs[t]; f != nil {
			return coll.Op{Fold: f, Builtin: true}, nil
		}
		return coll.Op{}, errs.New(errs.Op, call, rank, "%s is not defined on %v (MPI defines it on value-index pairs: the mpi.Pair types of mpi.LocPair)", d.name, t)
	}
	if k := t.Kind(); d.kernels[k] != nil {
		return coll.Op{Fold: d.kernels[k], Fold3: d.fused[k], Builtin: true}, nil
	}
	return coll.Op{}, errs.New(errs.Op, call, rank, "%s is not defined on %v (MPI defines it on %s)", d.name, t, domains[d.name])
}

var domains = map[string]string{
	"Sum": "integers, floats and complex", "Prod": "integers, floats and complex",
	"Min": "integers and floats", "Max": "integers and floats",
	"Land": "integers and bool", "Lor": "integers and bool", "Lxor": "integers and bool",
	"Band": "integers", "Bor": "integers", "Bxor": "integers",
}

// view is a byte buffer of whole elements as a []T, without copying. An empty
// buffer may point at the end of its allocation, where no T fits: it views as nil.
func view[T any](b []byte) []T {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/int(unsafe.Sizeof(*new(T))))
}

// raw views a buffer of a reduction as its bytes (bytesOf, for pairs too).
func raw[T Reducible](s []T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(*new(T))))
}

// width is the size in bytes of one element of a reduction (sizeOf, for pairs too).
func width[T Reducible]() int { return int(unsafe.Sizeof(*new(T))) }

type integer interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 | ~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uintptr
}

type float interface{ ~float32 | ~float64 }

type cplx interface{ ~complex64 | ~complex128 }

func init() {
	addInteger[int](reflect.Int)
	addInteger[int8](reflect.Int8)
	addInteger[int16](reflect.Int16)
	addInteger[int32](reflect.Int32)
	addInteger[int64](reflect.Int64)
	addInteger[uint](reflect.Uint)
	addInteger[uint8](reflect.Uint8)
	addInteger[uint16](reflect.Uint16)
	addInteger[uint32](reflect.Uint32)
	addInteger[uint64](reflect.Uint64)
	addInteger[uintptr](reflect.Uintptr)
	addFloat[float32](reflect.Float32)
	addFloat[float64](reflect.Float64)
	addArith[complex64](reflect.Complex64)
	addArith[complex128](reflect.Complex128)
	Land.d.kernels[reflect.Bool] = func(in, inout []byte) {
		a, b := views[bool](in, inout)
		for i := range b {
			b[i] = a[i] && b[i]
		}
	}
	Lor.d.kernels[reflect.Bool] = func(in, inout []byte) {
		a, b := views[bool](in, inout)
		for i := range b {
			b[i] = a[i] || b[i]
		}
	}
	Lxor.d.kernels[reflect.Bool] = func(in, inout []byte) {
		a, b := views[bool](in, inout)
		for i := range b {
			b[i] = a[i] != b[i]
		}
	}
	addLoc[float32, int32]()
	addLoc[float64, int32]()
	addLoc[int64, int32]()
	addLoc[int32, int32]()
	addLoc[int16, int32]()
	addLoc[float32, int]()
	addLoc[float64, int]()
	addLoc[int64, int]()
	addLoc[int32, int]()
	addLoc[int, int]()
}

// addLoc defines MinLoc and MaxLoc on Pair[V, I].
func addLoc[V integer | float, I integer]() {
	t := reflect.TypeFor[Pair[V, I]]()
	MinLoc.d.pairs[t] = func(in, inout []byte) { loc[V, I](in, inout, -1) }
	MaxLoc.d.pairs[t] = func(in, inout []byte) { loc[V, I](in, inout, +1) }
}

// loc sets inout[i] to whichever of in[i] and inout[i] has the value that compares
// as want (-1 the least, +1 the greatest), the lower index on a tie.
func loc[V integer | float, I integer](in, inout []byte, want int) {
	a, b := views[Pair[V, I]](in, inout)
	for i := range b {
		switch cmp.Compare(a[i].Value, b[i].Value) {
		case want:
			b[i] = a[i]
		case 0:
			b[i].Index = min(a[i].Index, b[i].Index)
		}
	}
}

func addArith[T integer | float | cplx](k reflect.Kind) {
	Sum.d.kernels[k], Sum.d.fused[k] = sum[T], sum3[T]
	Prod.d.kernels[k], Prod.d.fused[k] = prod[T], prod3[T]
}

func addOrdered[T integer | float](k reflect.Kind) {
	Min.d.kernels[k], Min.d.fused[k] = least[T], least3[T]
	Max.d.kernels[k], Max.d.fused[k] = most[T], most3[T]
}

func addFloat[T float](k reflect.Kind) {
	addArith[T](k)
	addOrdered[T](k)
}

func addInteger[T integer](k reflect.Kind) {
	addArith[T](k)
	addOrdered[T](k)
	Land.d.kernels[k] = land[T]
	Lor.d.kernels[k] = lor[T]
	Lxor.d.kernels[k] = lxor[T]
	Band.d.kernels[k] = band[T]
	Bor.d.kernels[k] = bor[T]
	Bxor.d.kernels[k] = bxor[T]
}

// The kernels are functions of their own rather than closures: inside a closure of
// a generic function Go calls view instead of inlining it (a Scan of one float64
// on 4 ranks spent a tenth of its instructions in those calls).

// views views in and inout as elements of T, in cut to inout's length.
func views[T any](in, inout []byte) (a, b []T) {
	n := len(inout) / int(unsafe.Sizeof(*new(T)))
	if n == 0 {
		return nil, nil
	}
	in = in[:len(inout)]
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(in))), n), unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(inout))), n)
}

func sum[T integer | float | cplx](in, inout []byte) {
	a, b := views[T](in, inout)
	for i := range b {
		b[i] = a[i] + b[i]
	}
}

// views4 is views of a fused fold's buffers: a, b, c and d cut to out's length.
func views4[T any](a, b, c, d, out []byte) (x, y, z, v, w []T) {
	x, w = views[T](a, out)
	y, _ = views[T](b, out)
	z, _ = views[T](c, out)
	v, _ = views[T](d, out)
	return x, y, z, v, w
}

// The fused folds (coll.Op.Fold3) of the operations whose long reductions are
// common: each computes out = a op (b op (c op d)), the expression the kernel's
// folds of d, c, b and a compute, so that the result is the same to the bit. Each
// first cuts its views to out's length, so that its loop indexes them without a
// bounds check (4 ranks' Reduce of 256 KiB of doubles: 45-53 -> 37-42 µs).

func sum3[T integer | float | cplx](a, b, c, d, out []byte) {
	x, y, z, v, w := views4[T](a, b, c, d, out)
	x, y, z, v = x[:len(w)], y[:len(w)], z[:len(w)], v[:len(w)]
	for i := range w {
		w[i] = x[i] + (y[i] + (z[i] + v[i]))
	}
}

func prod3[T integer | float | cplx](a, b, c, d, out []byte) {
	x, y, z, v, w := views4[T](a, b, c, d, out)
	x, y, z, v = x[:len(w)], y[:len(w)], z[:len(w)], v[:len(w)]
	for i := range w {
		w[i] = x[i] * (y[i] * (z[i] * v[i]))
	}
}

func least3[T integer | float](a, b, c, d, out []byte) {
	x, y, z, v, w := views4[T](a, b, c, d, out)
	x, y, z, v = x[:len(w)], y[:len(w)], z[:len(w)], v[:len(w)]
	for i := range w {
		w[i] = min(x[i], min(y[i], min(z[i], v[i])))
	}
}

func most3[T integer | float](a, b, c, d, out []byte) {
	x, y, z, v, w := views4[T](a, b, c, d, out)
	x, y, z, v = x[:len(w)], y[:len(w)], z[:len(w)], v[:len(w)]
	for i := range w {
		w[i] = max(x[i], max(y[i], max(z[i], v[i])))
	}
}

func prod[T integer | float | cplx](in, inout []byte) {
	a, b := views[T](in, inout)
	for i := range b {
		b[i] = a[i] * b[i]
	}
}

func least[T integer | float](in, inout []byte) {
	a, b := views[T](in, inout)
	for i := range b {
		b[i] = min(a[i], b[i])
	}
}

func most[T integer | float](in, inout []byte) {
	a, b := views[T](in, inout)
	for i := range b {
		b[i] = max(a[i], b[i])
	}
}

func land[T integer](in, inout []byte) {
	a, b := views[T](in, inout)
	for i := range b {
		b[i] = truth[T](a[i] != 0 && b[i] != 0)
	}
}

func lor[T integer](in, inout []byte) {
	a, b := views[T](in, inout)
	for i := range b {
		b[i] = truth[T](a[i] != 0 || b[i] != 0)
	}
}

func lxor[T integer](in, inout []byte) {
	a, b := views[T](in, inout)
	for i := range b {
		b[i] = truth[T]((a[i] != 0) != (b[i] != 0))
	}
}

func band[T integer](in, inout []byte) {
	a, b := views[T](in, inout)
	for i := range b {
		b[i] = a[i] & b[i]
	}
}

func bor[T integer](in, inout []byte) {
	a, b := views[T](in, inout)
	for i := range b {
		b[i] = a[i] | b[i]
	}
}

func bxor[T integer](in, inout []byte) {
	a, b := views[T](in, inout)
	for i := range b {
		b[i] = a[i] ^ b[i]
	}
}

// truth is C's value of a condition: 1 or 0.
func truth[T integer](v bool) T {
	if v {
		return 1
	}
	return 0
}
