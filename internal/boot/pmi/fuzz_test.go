package pmi

import (
	"fmt"
	"strings"
	"testing"
)

func TestParseMapping(t *testing.T) {
	good := []struct {
		in    string
		size  int
		nodes string
	}{
		{"(vector,(0,2,4))", 8, "[0 0 0 0 1 1 1 1]"},
		{"(vector,(0,1,3),(1,1,2))", 5, "[0 0 0 1 1]"},
		{"(vector,(0,1,1))", 3, "[0 0 0]"}, // Hydra, -n 3 on one host: the pattern repeats
		{"(vector,(0,1,3))", 3, "[0 0 0]"},
		{"(vector,(0,2,1),(0,2,1))", 4, "[0 1 0 1]"}, // Slurm cyclic
		{"(vector,(0,2,2))", 4, "[0 0 1 1]"},
		{"(vector,0,1,1,0)", 4, "[0 1 1 0]"},
		{"(vector,[(0,2,1)]x2)", 4, "[0 1 0 1]"},
		{"(vector,[0,1]x2,(2,1,2))", 6, "[0 1 0 1 2 2]"},
		{" ( vector , ( 0 , 2 , 4 ) ) ", 8, "[0 0 0 0 1 1 1 1]"},
		{"(vector,(0,2,4))", 3, "[0 0 0]"},
	}
	for _, g := range good {
		blocks, err := ParseMapping(g.in)
		if err != nil {
			t.Errorf("ParseMapping(%q): %v", g.in, err)
			continue
		}
		nodes, err := ExpandMapping(blocks, g.size)
		if err != nil || fmt.Sprint(nodes) != g.nodes {
			t.Errorf("ExpandMapping(%q, %d) = %v, %v; want %s", g.in, g.size, nodes, err, g.nodes)
		}
	}
	if b, _ := ParseMapping("(vector,(0,1,3),(1,1,2))"); fmt.Sprint(b) != "[{0 1 3} {1 1 2}]" {
		t.Errorf("blocks %v", b)
	}
	for _, bad := range []string{
		"", "vector", "(vector)", "(vector,)", "(vector,(0,2))", "(vector,(0,2,4)", "(vector,(0,2,4)))",
		"(vector,(0,0,4))", "(vector,(0,2,0))", "(vector,(a,2,4))", "(vector,(-1,2,4))",
		"(vector,(0,2,99999999999))", "(vector,[(0,1,1)]x99999999)", "(vector,[(0,1,1)])", "(vector,[[0]x2]x2)",
		"(blob,(0,1,1))", "(vector,(0,1,1)) extra",
	} {
		if b, err := ParseMapping(bad); err == nil {
			t.Errorf("ParseMapping(%q) accepted: %v", bad, b)
		}
	}
	if _, err := ExpandMapping(nil, 2); err == nil {
		t.Error("ExpandMapping(nil, 2) accepted")
	}
	if _, err := ExpandMapping([]Block{{0, 0, 1}}, 2); err == nil {
		t.Error("ExpandMapping of an empty block accepted")
	}
}

func FuzzParseMapping(f *testing.F) {
	for _, s := range []string{"(vector,(0,2,4))", "(vector,(0,1,3),(1,1,2))", "(vector,(0,1,1))",
		"(vector,[0,(1,2,3)]x4,5)", "(vector,(", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		blocks, err := ParseMapping(s)
		if err != nil {
			return
		}
		if len(blocks) == 0 {
			t.Fatalf("%q: no error and no blocks", s)
		}
		nodes, err := ExpandMapping(blocks, 64)
		if err != nil || len(nodes) != 64 {
			t.Fatalf("%q: ExpandMapping: %v, %d nodes", s, err, len(nodes))
		}
	})
}

func FuzzParseReply(f *testing.F) {
	for _, s := range []string{
		"cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n",
		"cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024",
		"cmd=get_result rc=-1 msg=key_x_not_found value=unknown",
		"cmd=get_result rc=0 msg=success value=a=b",
		"cmd=barrier_out", "garbage", "=", "cmd= rc=0", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := parseReply(s)
		if err != nil {
			return
		}
		if r.cmd == "" || r.fields["cmd"] != r.cmd {
			t.Fatalf("%q: accepted with cmd %q", s, r.cmd)
		}
		for k, v := range r.fields {
			if k == "" || strings.ContainsAny(k, " \t\n") || strings.ContainsAny(v, " \t\n") {
				t.Fatalf("%q: field %q=%q", s, k, v)
			}
		}
		_ = r.check("get", "get_result")
		_, _ = r.needInt("get", "rc")
	})
}

// FuzzValueRoundTrip checks that Put's encoding and splitting, through a
// server that truncates like Hydra, give back any bytes under any limit.
func FuzzValueRoundTrip(f *testing.F) {
	f.Add("a b=c\n", 16)
	f.Add(strings.Repeat("x", 3000), 1024)
	f.Fuzz(func(t *testing.T, v string, vallen int) {
		if vallen < 8 || vallen > 4096 || len(v) > 1<<14 {
			return
		}
		job := newFakeJob(1, 64, vallen)
		c := job.client(t, 0)
		mustInit(t, c)
		if err := c.Put("k", v); err != nil {
			t.Fatal(err)
		}
		got, err := c.Get("k")
		if err != nil || got != v {
			t.Fatalf("vallen %d: got %q, %v", vallen, clip(got), err)
		}
	})
}
