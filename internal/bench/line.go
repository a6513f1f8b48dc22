package bench

import (
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
