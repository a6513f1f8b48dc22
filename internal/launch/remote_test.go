//go:build unix

package launch

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The fake rsh commands, written by TestMain before any test runs: a file
// written while another test forks may still be open in the child for a
// moment, and exec fails with "text file busy".
var fakeRsh, fakeWrapper string

// writeFakes writes into dir:
//
//   - fake-ssh, which behaves as ssh does where it matters: it takes the host
//     as its first argument, joins the rest with spaces and runs that string
//     with a shell. Hosts whose names begin with "down" it fails to reach, as
//     ssh does (status 255).
//   - fake-wrap, a wrapper of the other kind, which executes its arguments
//     after the host as they are (as ip netns exec does).
//
// Both export the host as FAKE_RSH_HOST, which the helper prints.
func writeFakes(dir string) error {
	fakeRsh, fakeWrapper = filepath.Join(dir, "fake-ssh"), filepath.Join(dir, "fake-wrap")
	const common = "#!/bin/sh\nFAKE_RSH_HOST=$1\nexport FAKE_RSH_HOST\nshift\n"
	ssh := common + "case $FAKE_RSH_HOST in down*) echo \"ssh: connect to host $FAKE_RSH_HOST port 22: Connection refused\" >&2; exit 255;; esac\n" +
		"exec sh -c \"$*\"\n"
	if err := os.WriteFile(fakeRsh, []byte(ssh), 0o755); err != nil {
		return err
	}
	return os.WriteFile(fakeWrapper, []byte(common+"exec \"$@\"\n"), 0o755)
}

// awkward are arguments that a shell would split, expand or choke on.
var awkward = []string{"it's", `a "test"`, "$HOME", "`id`", `back\slash`, "; exit 3 &", "", "two\nlines", "*", "~", "-n"}

// TestRemote runs procs on made-up hosts through both kinds of rsh command:
// PMI over TCP with PMI_PORT and PMI_ID, the host map with slots, the
// environment, and the program's arguments arriving exactly as given.
func TestRemote(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		rsh  string
	}{
		{"ssh-like", fakeRsh},
		{"exec-like", fakeWrapper + " {host}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// 5 procs on hostA:2,hostB:1 fill A, B, then A again: A runs 4.
			o := launch(t, Config{Ranks: 5, Hosts: []Host{{"hostA", 2}, {"hostB", 1}}, Rsh: tc.rsh, LauncherAddr: "127.0.0.1"},
				append([]string{"args"}, awkward...)...)
			if o.err != nil {
				t.Fatal(o.dump())
			}
			got := oks(t, o)
			if len(got) != 5 {
				t.Fatalf("%d procs finished, want 5\n%s", len(got), o.dump())
			}
			for p, f := range got {
				host := "hostA"
				if p == 4 {
					host = "hostB"
				}
				want := map[string]string{"mode": "port", "host": host, "rsh": host, "layout": "1+1+1+1,1", "nodes": "[0,0,0,0,1]", "size": "5"}
				for k, v := range want {
					if f[k] != v {
						t.Errorf("proc %d: %s=%s, want %s", p, k, f[k], v)
					}
				}
			}
			if want := fmt.Sprintf("args=%q\n", awkward); strings.Count(o.stdout, want) != 5 {
				t.Errorf("want 5 lines %q\n%s", want, o.dump())
			}
		})
	}
}

// TestMixed: "localhost" in the host list runs here with PMI_FD; the others
// through rsh with PMI_PORT, in one job.
func TestMixed(t *testing.T) {
	t.Parallel()
	o := launch(t, Config{Ranks: 6, PerProc: 2, Hosts: []Host{{"localhost", 1}, {"hostB", 2}}, Rsh: fakeRsh, LauncherAddr: "127.0.0.1"})
	if o.err != nil {
		t.Fatal(o.dump())
	}
	got := oks(t, o)
	for p, want := range []string{"fd localhost [0,1,1] 0-1", "port hostB [0,1,1] 2-3", "port hostB [0,1,1] 4-5"} {
		f := got[p]
		if g := strings.Join([]string{f["mode"], f["host"], f["nodes"], f["ranks"]}, " "); g != want || f["layout"] != "2,2+2" {
			t.Errorf("proc %d: %s layout %s, want %s layout 2,2+2", p, g, f["layout"], want)
		}
	}
}

// TestLauncherAddrRule: with no --launcher-addr, a host that resolves is
// given the address this machine reaches it from.
func TestLauncherAddrRule(t *testing.T) {
	t.Parallel()
	o := launch(t, Config{Ranks: 1, Hosts: []Host{{"127.0.0.1", 1}}, Rsh: fakeRsh}, "pmiport")
	if o.err != nil || !strings.Contains(o.stdout, "PMI_PORT=127.0.0.1:") {
		t.Fatalf("want PMI_PORT=127.0.0.1:port\n%s", o.dump())
	}
}

// TestStrangers: connections to the PMI port that do not identify as a proc
// of the job, or reuse a proc's identity, are refused and logged, and the job
// goes on.
func TestStrangers(t *testing.T) {
	t.Parallel()
	o := launch(t, Config{Ranks: 3, Hosts: []Host{{"hostA", 3}}, Rsh: fakeRsh, LauncherAddr: "127.0.0.1"}, "stranger")
	if o.err != nil || !strings.Contains(o.stdout, "strangers refused") || len(oks(t, o)) != 3 {
		t.Fatalf("the job should succeed after refusing strangers\n%s", o.dump())
	}
	for _, why := range []string{"identify first with cmd=initack", "unknown pmiid", "pmiid already used", "no identification"} {
		if !strings.Contains(o.stderr, "weft run: refused a PMI connection from 127.0.0.1:") || !strings.Contains(o.stderr, why) {
			t.Errorf("stderr does not log a refusal for %q\n%s", why, o.dump())
		}
	}
}

// TestHostFails: a host that cannot be reached ends the job, with the procs
// already running elsewhere.
func TestHostFails(t *testing.T) {
	t.Parallel()
	o := launch(t, Config{Ranks: 3, Hosts: []Host{{"hostA", 2}, {"downB", 1}}, Rsh: fakeRsh, LauncherAddr: "127.0.0.1"})
	wantFailure(t, o, 255, 2, "downB", "rank 2", "exited with status 255")
	if !strings.Contains(o.stderr, "ssh: connect to host downB port 22: Connection refused") {
		t.Errorf("the rsh command's message is not forwarded\n%s", o.dump())
	}
}
