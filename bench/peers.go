// Package bench carries the C twins of Weft's benchmark suites (peers/*.c),
// so that the weft binary can build and run them beside Weft wherever a C MPI
// is installed, with no checkout of the sources at hand. Each twin takes its
// suite's flags and prints its suite's result lines (see internal/bench).
//
// The embedding lives here, not in bench/peers: Go refuses a package
// directory holding C files unless the package uses cgo, which Weft does not.
package bench

import (
	"embed"
	"io/fs"
)

//go:embed peers/*.c peers/*.h
var sources embed.FS

// Peers holds every twin by file name (p2p.c, coll.c, threads.c, ...) and the
// headers they share (twin.h).
var Peers, _ = fs.Sub(sources, "peers")
