//go:build unix

package launch

import (
	"net"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

func TestRshArgv(t *testing.T) {
	for _, tc := range []struct {
		template, host string
		want           []string
	}{
		{"ssh", "n1", []string{"ssh", "n1", "sh -c 'echo a b'"}},
		{"ssh -p 2222  -x", "n1", []string{"ssh", "-p", "2222", "-x", "n1", "sh -c 'echo a b'"}},
		{"ip netns exec {host}", "ns0", []string{"ip", "netns", "exec", "ns0", "sh", "-c", "echo a b"}},
		{"docker exec -i c-{host}", "h", []string{"docker", "exec", "-i", "c-h", "sh", "-c", "echo a b"}},
	} {
		got, err := RshArgv(tc.template, tc.host, "echo a b")
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("RshArgv(%q) = %q, %v; want %q", tc.template, got, err, tc.want)
		}
	}
	if _, err := RshArgv("  ", "h", "true"); err == nil {
		t.Error("an empty rsh command was accepted")
	}
}

// TestShellQuote: sh reads every quoted word back as it was.
func TestShellQuote(t *testing.T) {
	words := append([]string{"plain", "a=b", "/x/y.z", "'", "''", "\t", "\x01\xff", "é"}, awkward...)
	var script strings.Builder
	script.WriteString("printf '%s\\0'")
	for _, w := range words {
		script.WriteString(" " + shellQuote(w))
	}
	out, err := exec.Command("sh", "-c", script.String()).Output()
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	if !slices.Equal(got, words) {
		t.Errorf("sh read back %q, want %q", got, words)
	}
	if shellQuote("plain") != "plain" || shellQuote("") != "''" {
		t.Errorf("shellQuote: plain words stay plain, the empty word is ''")
	}
}

func TestSplitLauncherAddr(t *testing.T) {
	for in, want := range map[string]struct {
		host string
		port int
	}{
		"10.0.0.1":      {"10.0.0.1", 0},
		"10.0.0.1:7000": {"10.0.0.1", 7000},
		"head":          {"head", 0},
		"[fe80::1]:80":  {"fe80::1", 80},
		"fe80::1":       {"fe80::1", 0},
		"[fe80::1]":     {"fe80::1", 0},
	} {
		h, p, err := splitLauncherAddr(in)
		if err != nil || h != want.host || p != want.port {
			t.Errorf("splitLauncherAddr(%q) = %q, %d, %v; want %q, %d", in, h, p, err, want.host, want.port)
		}
	}
	for _, bad := range []string{":80", "h:x", "h:70000", "h:"} {
		if _, _, err := splitLauncherAddr(bad); err == nil {
			t.Errorf("splitLauncherAddr(%q) accepted", bad)
		}
	}
}

func TestLauncherAddr(t *testing.T) {
	if got, err := launcherAddr("127.0.0.1"); err != nil || got != "127.0.0.1" {
		t.Errorf("launcherAddr(127.0.0.1) = %q, %v", got, err)
	}
	// A name that does not resolve gets a non-loopback IPv4 address of this
	// machine, if it has one.
	got, err := firstIPv4()
	if err != nil {
		t.Skipf("this machine has no IPv4 address but loopback: %v", err)
	}
	ip := net.ParseIP(got)
	if ip == nil || ip.To4() == nil || ip.IsLoopback() {
		t.Errorf("firstIPv4() = %q", got)
	}
}

// TestRemoteEnvironment: a remote proc is given the launcher's WEFT_*
// tunables and nothing else of its environment, every value quoted.
func TestRemoteEnvironment(t *testing.T) {
	got := remoteWeftEnv([]string{"PATH=/bin", "WEFT_SPIN=3us", "WEFT_JOB=weft-stale", "WEFT_A-B=1", "PMI_FD=3", "WEFT_EAGER_LIMIT=1 024"})
	if want := []string{"WEFT_SPIN=3us", "WEFT_EAGER_LIMIT=1 024"}; !slices.Equal(got, want) {
		t.Errorf("remoteWeftEnv = %q, want %q", got, want)
	}
	script := remoteScript("/home/a b", []string{"A=1", "B=it's"}, "./prog", []string{"x y"})
	if want := `cd '/home/a b' && export A=1 B='it'\''s' && exec ./prog 'x y'`; script != want {
		t.Errorf("remoteScript = %s\nwant            %s", script, want)
	}
}
