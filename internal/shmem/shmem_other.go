//go:build !linux

package shmem

import (
	"os"
	"sync/atomic"
	"time"
)

func Create(int) (*Segment, *os.File, error)      { return nil, nil, ErrUnsupported }
func Map(*os.File, int) (*Segment, error)         { return nil, ErrUnsupported }
func (s *Segment) Unmap() error                   { return nil }
func Sleep(*atomic.Uint32, uint32, time.Duration) {}
func Wake(*atomic.Uint32)                         {}
