package coll

import (
	"runtime"
	"slices"
	"testing"
	"time"
)

// TestQueueOrder: operations run one at a time in the order queued, Idle is false
// until the last is over, and the queue's goroutine ends when it is empty (and a
// new one starts for the next operation).
func TestQueueOrder(t *testing.T) {
	c := New(NewJob(), 2, 0)
	if c.Queued(1) != nil || !c.Queued(1).Idle() {
		t.Fatal("a rank that never queued anything has a queue, or a busy one")
	}
	q := c.Queue(1)
	if c.Queue(1) != q || c.Queued(1) != q || c.Queued(0) != nil {
		t.Fatal("Queue does not return the rank's one queue")
	}
	base := runtime.NumGoroutine()
	for round := range 2 {
		release := make(chan struct{})
		var order []int
		running := 0
		done := make(chan struct{})
		for i := range 50 {
			q.Go(func() {
				if running++; running != 1 {
					t.Errorf("round %d: operation %d runs beside another", round, i)
				}
				if i == 0 {
					<-release
				}
				order = append(order, i)
				running--
				if i == 49 {
					close(done)
				}
			})
		}
		if q.Idle() {
			t.Fatalf("round %d: idle with operations queued", round)
		}
		close(release)
		<-done
		deadline := time.Now().Add(5 * time.Second)
		for !q.Idle() || runtime.NumGoroutine() > base {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: idle %v, %d goroutines (%d before) after the last operation", round, q.Idle(), runtime.NumGoroutine(), base)
			}
			time.Sleep(time.Millisecond)
		}
		want := make([]int, 50)
		for i := range want {
			want[i] = i
		}
		if !slices.Equal(order, want) {
			t.Fatalf("round %d: ran in order %v", round, order)
		}
	}
}
