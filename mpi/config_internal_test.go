package mpi

import (
	"os"
	"testing"
	"time"
)

// TestCrowdedNetSpin: a host with more procs than CPUs polls the network for
// CrowdedNetSpin, unless the budget was chosen by an option or the environment,
// and counts as crowded (its ranks leave the rings to the daemons).
func TestCrowdedNetSpin(t *testing.T) {
	for _, tc := range []struct {
		name       string
		env        string
		opts       []Option
		procs, cpu int
		want       time.Duration
	}{
		{"fits", "", nil, 2, 2, DefaultNetSpin},
		{"crowded", "", nil, 4, 2, CrowdedNetSpin},
		{"crowded, option", "", []Option{WithNetSpin(150 * time.Microsecond)}, 4, 2, 150 * time.Microsecond},
		{"crowded, environment", "300us", nil, 16, 2, 300 * time.Microsecond},
		{"crowded, environment 0", "0", nil, 16, 2, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("WEFT_NET_SPIN", tc.env) // restored when the test ends
			if tc.env == "" {
				os.Unsetenv("WEFT_NET_SPIN")
			}
			c, err := newConfig(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			c.crowd(tc.procs, tc.cpu)
			if c.netSpin != tc.want {
				t.Errorf("%d procs on %d CPUs: net spin %v, want %v", tc.procs, tc.cpu, c.netSpin, tc.want)
			}
			if c.crowded != (tc.procs > tc.cpu) {
				t.Errorf("%d procs on %d CPUs: crowded %v", tc.procs, tc.cpu, c.crowded)
			}
		})
	}
}
