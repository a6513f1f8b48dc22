package netd

import "fmt"

// ConnectAll makes channel ch's connections to the procs after ours now instead
// of on first use; they make ours, so every pair of procs ends up connected. A
// proc whose connections are all made learns of any other's death (its receive
// daemon sees the connection break, Handler.Lost), also of one it never sent to:
// a job whose survivors go on (errors-return) needs that to fail the receives
// waiting for the dead proc. It costs a connection per pair of procs, which is why
// connections are otherwise lazy. It returns the first proc it could not reach.
func (d *Device) ConnectAll(ch Channel) error {
	for proc := d.cfg.Self + 1; proc < d.cfg.Procs; proc++ {
		l := &d.peer(proc).links[ch]
		l.wmu.Lock()
		_, err := l.connect()
		l.turn()
		if err != nil {
			return fmt.Errorf("netd: connecting to proc %d: %w", proc, err)
		}
	}
	return nil
}
