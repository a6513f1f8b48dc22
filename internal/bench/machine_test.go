package bench

import (
	"runtime"
	"strings"
	"testing"
)

func TestProbeMachine(t *testing.T) {
	m := probeMachine()
	if m.Cores != runtime.NumCPU() || m.CopyGBs <= 0 || m.HandoffNs < 0 || !strings.Contains(m.Summary(), runtime.Version()) {
		t.Errorf("machine %+v", m)
	}
	if runtime.GOOS == "linux" {
		if m.CPU == "" || len(strings.Fields(m.LoadStart)) != 3 {
			t.Errorf("on Linux, no CPU model or load average: %+v", m)
		}
		if b := othersBusy(); b < 0 || b > 100 {
			t.Errorf("others keep %d%% of the CPUs busy", b)
		}
	}
}
