package launch

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/weft-mpi/weft/internal/topo"
)

// ParseHosts reads a --hosts list: "h1:slots,h2:slots", where ":slots" may be
// left out (1 slot). An IPv6 address is written in brackets: "[fe80::1]:4".
func ParseHosts(list string) ([]Host, error) {
	var hosts []Host
	for _, item := range strings.Split(list, ",") {
		h, err := parseHost(strings.TrimSpace(item))
		if err != nil {
			return nil, err
		}
		hosts = append(hosts, h)
	}
	return hosts, nil
}

// ParseHostfile reads a host file: one host per line, as "host", "host:slots"
// or "host slots=N"; '#' starts a comment; blank lines are skipped.
func ParseHostfile(r io.Reader) ([]Host, error) {
	var hosts []Host
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(line)
		var h Host
		var err error
		switch {
		case len(f) == 0:
			continue
		case len(f) == 1:
			h, err = parseHost(f[0])
		case len(f) == 2 && strings.HasPrefix(f[1], "slots=") && !strings.Contains(f[0], ":"):
			h, err = parseHost(f[0] + ":" + strings.TrimPrefix(f[1], "slots="))
		default:
			err = fmt.Errorf("want \"host\", \"host:slots\" or \"host slots=N\", got %q", strings.TrimSpace(line))
		}
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		hosts = append(hosts, h)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(hosts) == 0 {
		return nil, errors.New("no hosts")
	}
	return hosts, nil
}

// parseHost reads "name", "name:slots", "[v6]" or "[v6]:slots".
func parseHost(s string) (Host, error) {
	name, slots := s, ""
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return Host{}, fmt.Errorf("host %q: missing ']'", s)
		}
		name, slots = s[1:end], s[end+1:]
		if slots != "" && !strings.HasPrefix(slots, ":") {
			return Host{}, fmt.Errorf("host %q: want \"[address]:slots\"", s)
		}
		slots = strings.TrimPrefix(slots, ":")
	} else if i := strings.IndexByte(s, ':'); i >= 0 {
		if strings.Count(s, ":") > 1 {
			return Host{}, fmt.Errorf("host %q: write an IPv6 address in brackets, as [%s]", s, s)
		}
		name, slots = s[:i], s[i+1:]
	}
	switch {
	case name == "":
		return Host{}, fmt.Errorf("host %q: empty host name", s)
	case strings.HasPrefix(name, "-"):
		// An rsh command would take it for an option.
		return Host{}, fmt.Errorf("host %q: a host name cannot begin with '-'", s)
	case strings.ContainsAny(name, " \t\r\n"):
		return Host{}, fmt.Errorf("host %q: white space in a host name", s)
	}
	h := Host{Name: name, Slots: 1}
	if slots != "" || strings.HasSuffix(s, ":") {
		n, err := strconv.Atoi(slots)
		if err != nil || n < 1 {
			return Host{}, fmt.Errorf("host %q: slots must be a whole number of at least 1, got %q", s, slots)
		}
		h.Slots = n
	}
	return h, nil
}

// placement is where every proc of a job runs and which ranks it hosts.
type placement struct {
	layout *topo.Layout
	hosts  []string // the hosts that run procs, in the order of the layout
	// mapping is PMI_process_mapping: the node (index in hosts) of each proc,
	// in MPICH's (vector,(first node,nodes,procs per node),...) form.
	mapping string
}

// place puts ranks ranks, perProc to a proc, on hosts. How many procs each host
// gets follows Hydra: procs go to the hosts in order, each taking as many as
// its slots, around again when every slot is full. The procs of a host are then
// numbered consecutively, host after host in order of first appearance (a host
// named twice is one host): a Weft layout keeps the procs of a host together.
func place(ranks, perProc int, hosts []Host) (*placement, error) {
	if ranks < 1 {
		return nil, fmt.Errorf("need at least 1 rank, got %d", ranks)
	}
	if perProc < 1 {
		return nil, fmt.Errorf("ranks per proc must be at least 1, got %d", perProc)
	}
	if ranks > topo.MaxRanks {
		return nil, fmt.Errorf("%d ranks is more than the limit of %d", ranks, topo.MaxRanks)
	}
	procs := (ranks-1)/perProc + 1
	slots := 0
	for _, h := range hosts {
		if h.Slots < 1 {
			return nil, fmt.Errorf("host %s has %d slots, want at least 1", h.Name, h.Slots)
		}
		slots += min(h.Slots, procs) // capped: no sum overflows
	}
	// Full rounds of every slot, then the first rem slots of one more round.
	rounds, rem := procs/max(slots, 1), procs%max(slots, 1)
	count := map[string]int{}
	var order []string
	for _, h := range hosts {
		s := min(h.Slots, procs)
		n := rounds*s + min(s, rem)
		rem -= min(s, rem)
		if _, seen := count[h.Name]; !seen {
			order = append(order, h.Name)
		}
		count[h.Name] += n
	}
	p := &placement{}
	var shape [][]int
	proc := 0
	for _, name := range order {
		if count[name] == 0 {
			continue
		}
		sizes := make([]int, count[name])
		for i := range sizes {
			sizes[i] = min(perProc, ranks-proc*perProc)
			proc++
		}
		p.hosts = append(p.hosts, name)
		shape = append(shape, sizes)
	}
	var err error
	if p.layout, err = topo.Uneven(shape); err != nil {
		return nil, err
	}
	p.mapping = processMapping(shape)
	return p, nil
}

// processMapping writes the node of each proc, runs of nodes with as many
// procs merged into one (first node, nodes, procs per node) triple.
func processMapping(shape [][]int) string {
	var b strings.Builder
	b.WriteString("(vector")
	for h := 0; h < len(shape); {
		run := 1
		for h+run < len(shape) && len(shape[h+run]) == len(shape[h]) {
			run++
		}
		fmt.Fprintf(&b, ",(%d,%d,%d)", h, run, len(shape[h]))
		h += run
	}
	b.WriteString(")")
	return b.String()
}

// rankText names the ranks of a proc: "rank 3" or "ranks 4-7".
func rankText(first, n int) string {
	if n == 1 {
		return "rank " + strconv.Itoa(first)
	}
	return fmt.Sprintf("ranks %d-%d", first, first+n-1)
}
