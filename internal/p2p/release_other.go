//go:build !amd64 || race

package p2p

import "sync/atomic"

// storeRelease stores v in *p with (at least) release order: see release.go. The
// race detector sees the atomic store, and so the order it gives.
func storeRelease(p *atomic.Uint64, v uint64) { p.Store(v) }
