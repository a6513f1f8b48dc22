package mpi

import "unsafe"

// Elem is the set of element types a message buffer may hold: fixed-size values
// without pointers, so that a buffer can be copied as bytes.
type Elem interface {
	~bool | ~int | ~int8 | ~int16 | ~int32 | ~int64 |
		~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uintptr |
		~float32 | ~float64 | ~complex64 | ~complex128
}

// bytesOf views a typed buffer as its bytes, without copying.
func bytesOf[T Elem](s []T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(*new(T))))
}

// sizeOf is the size in bytes of one element of T.
func sizeOf[T Elem]() int { return int(unsafe.Sizeof(*new(T))) }
