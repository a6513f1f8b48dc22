//go:build !linux

package spin

// Yield does nothing where Weft has no polling across processes.
func Yield() {}
