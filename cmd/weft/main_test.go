package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

func TestInfoListsEveryTunable(t *testing.T) {
	t.Setenv("WEFT_SPIN", "3us")
	var out, errOut bytes.Buffer
	if code := run([]string{"info"}, &out, &errOut); code != 0 {
		t.Fatalf("weft info exited %d: %s", code, errOut.String())
	}
	for _, want := range []string{"version:", "thread levels:", "multiple", "transports:",
		"WEFT_EAGER_LIMIT", "WEFT_POOL_CAP", "WEFT_THREAD_LEVEL", "WEFT_NP"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("weft info lacks %q:\n%s", want, out.String())
		}
	}
	if !regexp.MustCompile(`WEFT_SPIN +WithSpin +3us +20µs`).MatchString(out.String()) {
		t.Errorf("weft info does not show WEFT_SPIN's value from the environment:\n%s", out.String())
	}
}

func TestUnknownCommand(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"frobnicate"}, &out, &errOut); code != 2 {
		t.Fatalf("exit %d, want 2", code)
	}
	if !strings.Contains(errOut.String(), `unknown command "frobnicate"`) {
		t.Errorf("stderr: %s", errOut.String())
	}
	if code := run(nil, &out, &errOut); code != 2 {
		t.Fatalf("no command: exit %d, want 2", code)
	}
}

func TestHelp(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"--help"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "weft info") {
		t.Fatalf("help: exit %d, %s", code, out.String())
	}
}
