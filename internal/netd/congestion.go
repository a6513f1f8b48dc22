package netd

import "net"

// CongestionAuto is the Config.Congestion that replaces a congestion control
// that paces its sends (BBR) by cubic, or reno where cubic is not allowed, and
// keeps any other.
const CongestionAuto = "auto"

// congest applies Config.Congestion to tc. A refusal leaves the system's
// algorithm and is logged once per Device: the link works either way.
func (d *Device) congest(tc *net.TCPConn) {
	want := d.cfg.Congestion
	if want == "" {
		return
	}
	rc, err := tc.SyscallConn()
	if err == nil {
		if cerr := rc.Control(func(fd uintptr) { _, err = setCongestion(fd, want) }); cerr != nil {
			err = cerr
		}
	}
	if err != nil {
		d.congestOnce.Do(func() {
			d.logf("netd: proc %d: TCP congestion control %q refused, links keep the system's: %v", d.cfg.Self, want, err)
		})
	}
}
