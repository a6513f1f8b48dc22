//go:build !amd64 || race

package limits

import "sync/atomic"

// publish stores v in *p with (at least) release order: see publish_amd64_test.go.
func publish(p *atomic.Uint64, v uint64) { p.Store(v) }
