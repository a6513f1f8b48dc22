package launch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// hostPlaceholder in an rsh template marks where the host name goes.
const hostPlaceholder = "{host}"

// RshArgv returns the command that runs script (a POSIX shell script) on host
// through the rsh template, a command split on white space (no quoting).
//
// Two kinds of rsh commands pass on their arguments differently, so the
// template says which kind it is:
//
//   - With {host} in it, the template is a wrapper that executes its
//     arguments as they are (ip netns exec {host}, docker exec {host},
//     chroot /srv/{host}): {host} is replaced by the host name in every
//     word, and "sh", "-c", script follow as three arguments.
//   - Without, the template is ssh-like: ssh joins its arguments with spaces
//     into one string for the remote login shell. The host is appended, then
//     one argument: "sh -c " and the script quoted for a POSIX shell. The
//     remote login shell unquotes it once, and sh runs the script, whatever
//     bytes it holds.
//
// Either way the script runs under sh, so it behaves alike on every host.
func RshArgv(template, host, script string) ([]string, error) {
	words := strings.Fields(template)
	if len(words) == 0 {
		return nil, errors.New("empty rsh command")
	}
	if !strings.Contains(template, hostPlaceholder) {
		return append(words, host, "sh -c "+shellQuote(script)), nil
	}
	argv := make([]string, 0, len(words)+3)
	for _, w := range words {
		argv = append(argv, strings.ReplaceAll(w, hostPlaceholder, host))
	}
	return append(argv, "sh", "-c", script), nil
}

// remoteScript is the shell script a remote proc runs: the launcher's working
// directory (as mpiexec does), the job's environment, and the program, every
// word quoted. A failing cd ends it with sh's own message, before the program
// runs where it would not expect to.
func remoteScript(dir string, env []string, program string, args []string) string {
	var b strings.Builder
	b.WriteString("cd " + shellQuote(dir) + " && export")
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		b.WriteString(" " + k + "=" + shellQuote(v))
	}
	b.WriteString(" && exec " + shellQuote(program))
	for _, a := range args {
		b.WriteString(" " + shellQuote(a))
	}
	return b.String()
}

// shellQuote quotes s as one word for a POSIX shell: as it is when every byte
// is one no shell treats specially, else in single quotes, where a quote
// inside ends the quoted part, is written as \' and opens the next.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-+./:,@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// resolveTimeout bounds looking a host name up, so that a host nobody's DNS
// knows costs seconds, not the resolver's minutes.
const resolveTimeout = 3 * time.Second

// launcherAddr returns the address at which procs on host reach this machine.
//
//   - If host resolves, it is the source address this machine's routing uses
//     toward host's first address: the address of the interface that faces
//     host, found by "connecting" a UDP socket (which sends nothing).
//   - Otherwise (a name only the rsh command knows, such as a network
//     namespace or a container), it is the first IPv4 address, not loopback,
//     of an interface that is up: the rsh wrapper then runs the proc on a
//     network that reaches this machine by its ordinary address.
//
// --launcher-addr overrides the rule where it guesses wrong (several
// networks, NAT).
func launcherAddr(host string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout)
	defer cancel()
	if ips, err := net.DefaultResolver.LookupIPAddr(ctx, host); err == nil && len(ips) > 0 {
		c, err := net.Dial("udp", net.JoinHostPort(ips[0].IP.String(), "9"))
		if err == nil {
			ip := c.LocalAddr().(*net.UDPAddr).IP
			c.Close()
			return ip.String(), nil
		}
	}
	addr, err := firstIPv4()
	if err != nil {
		return "", fmt.Errorf("host %s does not resolve: %w; give --launcher-addr", host, err)
	}
	return addr, nil
}

// firstIPv4 returns the first IPv4 address, not loopback, of an interface
// that is up.
func firstIPv4() (string, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return "", fmt.Errorf("listing network interfaces: %w", err)
	}
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
				return n.IP.String(), nil
			}
		}
	}
	return "", errors.New("this machine has no IPv4 address but loopback")
}

// splitLauncherAddr reads --launcher-addr: "host" or "host:port" (an IPv6
// address in brackets when a port follows).
func splitLauncherAddr(s string) (host string, port int, err error) {
	h, p, err := net.SplitHostPort(s)
	if err != nil {
		// No port: the whole of s is the host.
		h, p = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"), "0"
	}
	if h == "" {
		return "", 0, fmt.Errorf("launcher address %q: empty host", s)
	}
	port, err = strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("launcher address %q: bad port %q", s, p)
	}
	return h, port, nil
}
