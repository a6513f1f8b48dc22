package mpi

import (
	"os"
	"runtime"
	"time"
)

// WeftVersion is the version of this Weft module.
const WeftVersion = "0.1.0"

var epoch = time.Now()

// Wtime returns seconds elapsed on a monotonic clock since the process started.
func Wtime() float64 { return time.Since(epoch).Seconds() }

// Wtick returns the resolution of Wtime in seconds.
func Wtick() float64 { return 1e-9 }

// ProcessorName returns the name of the host this rank runs on.
func ProcessorName() (string, error) { return os.Hostname() }

// Version returns the MPI standard version whose chapters Weft implements so far.
func Version() (major, minor int) { return 1, 1 }

// LibraryVersion describes this build of Weft.
func LibraryVersion() string {
	return "Weft " + WeftVersion + " (" + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + ")"
}
