package bench

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// Report writes one result line of Weft's side: bench and impl=weft, then the
// row's fields as key, value pairs in the order given, then the measurement.
// It writes the same line a C twin prints for the same row, so the runner
// can set the two side by side.
func Report(w io.Writer, bench, metric string, value float64, unit string, row ...string) {
	var b strings.Builder
	fmt.Fprintf(&b, "bench=%s impl=weft", bench)
	for i := 0; i+1 < len(row); i += 2 {
		fmt.Fprintf(&b, " %s=%s", row[i], row[i+1])
	}
	fmt.Fprintf(&b, " metric=%s value=%.6g unit=%s\n", metric, value, unit)
	io.WriteString(w, b.String())
}

// Flags makes a suite body's flag set, named after the suite and silent: the
// body returns Parse's error instead of printing usage.
func Flags(suite string) *flag.FlagSet {
	fs := flag.NewFlagSet(suite, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// Parse reads a suite body's arguments, flags only; its errors name the suite
// ("coll: flag provided but not defined: -bogus").
func Parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%s: %w", fs.Name(), err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%s: unexpected argument %q (flags only)", fs.Name(), fs.Arg(0))
	}
	return nil
}
