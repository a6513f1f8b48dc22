package launch

import (
	"slices"
	"strings"
	"testing"

	"github.com/weft-mpi/weft/internal/boot/pmi"
)

func TestParseHosts(t *testing.T) {
	good := map[string][]Host{
		"a":                      {{"a", 1}},
		"a:2,b:3":                {{"a", 2}, {"b", 3}},
		" a , b:1 ":              {{"a", 1}, {"b", 1}},
		"[fe80::1]:4,10.0.0.1:2": {{"fe80::1", 4}, {"10.0.0.1", 2}},
		"[::1]":                  {{"::1", 1}},
	}
	for in, want := range good {
		got, err := ParseHosts(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("ParseHosts(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "a,", ":2", "a:", "a:0", "a:-1", "a:x", "a:2:3", "fe80::1", "[::1", "[::1]x", "-oProxyCommand=x", "a b"} {
		if got, err := ParseHosts(in); err == nil {
			t.Errorf("ParseHosts(%q) = %v, want an error", in, got)
		}
	}
}

func TestParseHostfile(t *testing.T) {
	text := "# cluster\nnode1\nnode2:4   # four\n\n  node3 slots=2\n[fe80::2]:3\n"
	got, err := ParseHostfile(strings.NewReader(text))
	want := []Host{{"node1", 1}, {"node2", 4}, {"node3", 2}, {"fe80::2", 3}}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("ParseHostfile = %v, %v; want %v", got, err, want)
	}
	for _, bad := range []string{"", "# nothing\n", "node1 4\n", "node1 slots=x\n", "node1:2 slots=3\n", "a\nb:0\n"} {
		if got, err := ParseHostfile(strings.NewReader(bad)); err == nil {
			t.Errorf("ParseHostfile(%q) = %v, want an error", bad, got)
		}
	}
	if _, err := ParseHostfile(strings.NewReader("a\nb:0\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("error %v should name line 2", err)
	}
}

func TestPlace(t *testing.T) {
	for _, tc := range []struct {
		ranks, perProc int
		hosts          []Host
		layout         string
		onHosts        []string
		mapping        string
	}{
		{5, 3, []Host{{"localhost", 1}}, "3+2", []string{"localhost"}, "(vector,(0,1,2))"},
		{4, 1, []Host{{"localhost", 1}}, "[1;4;1]", []string{"localhost"}, "(vector,(0,1,4))"},
		// A, B, then around again: A takes 4 of 6, B 2.
		{6, 1, []Host{{"a", 2}, {"b", 1}}, "1+1+1+1,1+1", []string{"a", "b"}, "(vector,(0,1,4),(1,1,2))"},
		{8, 2, []Host{{"a", 2}, {"b", 2}}, "[2;2;2]", []string{"a", "b"}, "(vector,(0,2,2))"},
		// Fewer procs than slots: the later host gets none.
		{3, 1, []Host{{"a", 5}, {"b", 5}}, "[1;3;1]", []string{"a"}, "(vector,(0,1,3))"},
		// A host named twice is one host.
		{4, 1, []Host{{"a", 1}, {"b", 1}, {"a", 1}}, "1+1+1,1", []string{"a", "b"}, "(vector,(0,1,3),(1,1,1))"},
		{7, 3, []Host{{"a", 2}, {"b", 1}}, "3+3,1", []string{"a", "b"}, "(vector,(0,1,2),(1,1,1))"},
		{3, 1, []Host{{"a", 1}, {"b", 1}, {"c", 1}}, "[1;1;3]", []string{"a", "b", "c"}, "(vector,(0,3,1))"},
	} {
		p, err := place(tc.ranks, tc.perProc, tc.hosts)
		if err != nil {
			t.Errorf("place(%d, %d, %v): %v", tc.ranks, tc.perProc, tc.hosts, err)
			continue
		}
		if p.layout.String() != tc.layout || !slices.Equal(p.hosts, tc.onHosts) || p.mapping != tc.mapping {
			t.Errorf("place(%d, %d, %v) = %s on %v, mapping %s; want %s on %v, mapping %s",
				tc.ranks, tc.perProc, tc.hosts, p.layout, p.hosts, p.mapping, tc.layout, tc.onHosts, tc.mapping)
			continue
		}
		// The mapping, read by the client, says what the layout says.
		blocks, err := pmi.ParseMapping(p.mapping)
		if err != nil {
			t.Fatal(err)
		}
		nodes, err := pmi.ExpandMapping(blocks, p.layout.Procs())
		if err != nil {
			t.Fatal(err)
		}
		for proc, node := range nodes {
			if h, _ := p.layout.HostOf(proc); h != node {
				t.Errorf("%s: proc %d on host %d, the mapping says node %d", tc.mapping, proc, h, node)
			}
		}
	}
	for _, bad := range []struct{ ranks, perProc int }{{0, 1}, {-1, 1}, {4, 0}, {4, -2}} {
		if _, err := place(bad.ranks, bad.perProc, []Host{{"a", 1}}); err == nil {
			t.Errorf("place(%d, %d) accepted", bad.ranks, bad.perProc)
		}
	}
}
