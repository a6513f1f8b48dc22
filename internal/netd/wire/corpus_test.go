package wire

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestSeedCorpus checks that the committed FuzzParse seeds are what their
// names say: files named bad_* or garbage_* are refused, the others parse.
func TestSeedCorpus(t *testing.T) {
	files, err := filepath.Glob("testdata/fuzz/FuzzParse/*")
	if err != nil || len(files) < 6 {
		t.Fatalf("want at least 6 seed files, have %d (%v)", len(files), err)
	}
	for _, name := range files {
		raw, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
		if len(lines) != 2 || lines[0] != "go test fuzz v1" ||
			!strings.HasPrefix(lines[1], "[]byte(") || !strings.HasSuffix(lines[1], ")") {
			t.Fatalf("%s: not a one-value corpus file", name)
		}
		s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		base := filepath.Base(name)
		wantBad := strings.HasPrefix(base, "bad_") || strings.HasPrefix(base, "garbage_")
		_, err = Parse([]byte(s))
		if wantBad && err == nil {
			t.Errorf("%s: parsed, want an error", base)
		}
		if !wantBad && err != nil {
			t.Errorf("%s: %v", base, err)
		}
	}
}
