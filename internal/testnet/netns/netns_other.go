//go:build !linux

package netns

import (
	"errors"
	"fmt"
)

// ErrUnavailable wraps Create's error when this machine cannot make namespaces.
var ErrUnavailable = errors.New("netns: network namespaces unavailable")

// Net is a bridge and namespaces joined to it (Linux only).
type Net struct {
	Bridge, Addr, Subnet string
	Hosts                []Host
}

// Host is one network namespace.
type Host struct{ NS, Addr, Veth string }

// Options shape a Net.
type Options struct{ Prefix, Rate string }

var errLinux = fmt.Errorf("%w: network namespaces need Linux", ErrUnavailable)

// Create fails: network namespaces are Linux's.
func Create(int, Options) (*Net, error) { return nil, errLinux }

// Available fails: network namespaces are Linux's.
func Available(bool) error { return errLinux }

// NetemAvailable is false: netem is Linux's.
func NetemAvailable() (bool, string) { return false, errLinux.Error() }

// Close does nothing.
func (nw *Net) Close() error { return nil }
