// Package topo names and places the ranks of a job: it maps a global rank to its address
// (host, proc, local rank) and back, in O(1) both ways.
//
// A job is P ranks per proc x O procs per host x M hosts ([P;O;M] in FG-MPI's notation), or an
// explicit uneven map of how many ranks each proc of each host runs. Either way the ranks of a
// proc are contiguous, and procs are numbered host-major, so the procs of a host are contiguous
// too. The transport layers use this to choose a path (same proc, same host, network) and the
// launchers use the text form (Parse, String) on command lines and in environment variables.
//
// Errors are plain errors naming what was expected; the public layer wraps them in its classes.
package topo

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
)

// MaxRanks is the largest job: ranks are int32 on the wire and in the per-proc tables.
const MaxRanks = math.MaxInt32

// Addr is where a rank runs.
type Addr struct {
	Host  int // the host, 0..Hosts()-1
	Proc  int // the job-wide proc index, 0..Procs()-1 (not the proc's index within its host)
	Local int // the rank's index inside its proc, 0..ranks of the proc-1
}

// Layout is the placement of a job's ranks. It is immutable after construction and safe for
// concurrent use. The zero value is not a valid layout; use Block, Uneven or Parse.
//
// A uniform layout (Block, or an Uneven or Parse input that happens to be uniform) is pure
// arithmetic and costs no per-proc or per-rank memory, so a million-rank job is a few words.
// An explicit layout keeps int32 tables per proc and per host, plus a rank-to-proc index of
// at most one int32 per rank (one per 2^k ranks, where 2^k is at most the smallest proc),
// built at the first Locate so that parsing a spec never allocates per rank.
type Layout struct {
	size, procs, hosts int

	// Uniform layouts: perProc > 0.
	perProc, procsPerHost int

	// Explicit layouts: perProc == 0.
	procStart []int32 // len procs+1: first rank of each proc, then size
	procHost  []int32 // len procs: host of each proc
	hostStart []int32 // len hosts+1: first proc of each host, then procs
	shift     uint    // bucket width 2^shift <= the smallest proc

	once   sync.Once
	bucket []int32 // bucket[b]: the proc holding rank b<<shift
}

// Block returns the uniform layout [perProc;procsPerHost;hosts]: ranks 0..perProc-1 in proc 0 on
// host 0, the next perProc in proc 1, and so on; procs 0..procsPerHost-1 on host 0, and so on.
func Block(perProc, procsPerHost, hosts int) (*Layout, error) {
	l, err := block(perProc, procsPerHost, hosts)
	if err != nil {
		return nil, fmt.Errorf("topo: Block: %w", err)
	}
	return l, nil
}

func block(perProc, procsPerHost, hosts int) (*Layout, error) {
	if perProc < 1 {
		return nil, fmt.Errorf("ranks per proc (P) must be at least 1, got %d", perProc)
	}
	if procsPerHost < 1 {
		return nil, fmt.Errorf("procs per host (O) must be at least 1, got %d", procsPerHost)
	}
	if hosts < 1 {
		return nil, fmt.Errorf("hosts (M) must be at least 1, got %d", hosts)
	}
	// Divide rather than multiply, so that no product overflows even where int is 32 bits.
	if perProc > MaxRanks/procsPerHost || perProc*procsPerHost > MaxRanks/hosts {
		return nil, fmt.Errorf("[%d;%d;%d] is more than the limit of %d ranks",
			perProc, procsPerHost, hosts, MaxRanks)
	}
	return &Layout{
		size:         perProc * procsPerHost * hosts,
		procs:        procsPerHost * hosts,
		hosts:        hosts,
		perProc:      perProc,
		procsPerHost: procsPerHost,
	}, nil
}

// Uneven returns an explicit layout: hosts[h][i] is the number of ranks of the i-th proc of host
// h. Ranks are contiguous per proc and procs are numbered host-major, as in Block; e.g.
// [][]int{{3, 2}, {4}} puts ranks 0-2 in proc 0 and 3-4 in proc 1 (host 0), 5-8 in proc 2
// (host 1). Every host needs at least one proc and every proc at least one rank. If the map is
// uniform (all procs the same size, all hosts the same number of procs), the result is the
// same as Block's. Uneven does not keep hosts.
func Uneven(hosts [][]int) (*Layout, error) {
	l, err := uneven(hosts)
	if err != nil {
		return nil, fmt.Errorf("topo: Uneven: %w", err)
	}
	return l, nil
}

func uneven(hosts [][]int) (*Layout, error) {
	if len(hosts) == 0 {
		return nil, errors.New("need at least one host, got none")
	}
	size, procs, minProc := 0, 0, MaxRanks
	uniform := true
	for h, ps := range hosts {
		if len(ps) == 0 {
			return nil, fmt.Errorf("host %d has no procs, want at least one", h)
		}
		if len(ps) != len(hosts[0]) {
			uniform = false
		}
		for i, n := range ps {
			if n < 1 {
				return nil, fmt.Errorf("proc %d of host %d has %d ranks, want at least 1", i, h, n)
			}
			if n > MaxRanks-size {
				return nil, fmt.Errorf("more than the limit of %d ranks (at proc %d of host %d)",
					MaxRanks, i, h)
			}
			if n != hosts[0][0] {
				uniform = false
			}
			size += n
			minProc = min(minProc, n)
		}
		procs += len(ps)
	}
	if uniform {
		return block(hosts[0][0], len(hosts[0]), len(hosts))
	}
	l := &Layout{
		size:      size,
		procs:     procs,
		hosts:     len(hosts),
		procStart: make([]int32, 0, procs+1),
		procHost:  make([]int32, 0, procs),
		hostStart: make([]int32, 0, len(hosts)+1),
	}
	first := 0
	for h, ps := range hosts {
		l.hostStart = append(l.hostStart, int32(len(l.procHost)))
		for _, n := range ps {
			l.procStart = append(l.procStart, int32(first))
			l.procHost = append(l.procHost, int32(h))
			first += n
		}
	}
	l.procStart = append(l.procStart, int32(size))
	l.hostStart = append(l.hostStart, int32(procs))
	for 2<<l.shift <= minProc {
		l.shift++
	}
	return l, nil
}

// buildIndex fills the rank-to-proc index: a bucket of 2^shift ranks, no wider than the
// smallest proc, overlaps at most two procs, so one table load and one comparison find any
// rank's proc.
func (l *Layout) buildIndex() {
	nb := (l.size-1)>>l.shift + 1
	l.bucket = make([]int32, nb)
	p := 0
	for b := range l.bucket {
		r := b << l.shift
		for int(l.procStart[p+1]) <= r {
			p++
		}
		l.bucket[b] = int32(p)
	}
}

// Size is the number of ranks of the job.
func (l *Layout) Size() int { return l.size }

// Procs is the number of procs of the job.
func (l *Layout) Procs() int { return l.procs }

// Hosts is the number of hosts of the job.
func (l *Layout) Hosts() int { return l.hosts }

// Uniform reports whether the layout is [P;O;M] and, if so, P and O: a caller can then use
// arithmetic (or a cheaper algorithm) where every proc is alike.
func (l *Layout) Uniform() (perProc, procsPerHost int, ok bool) {
	return l.perProc, l.procsPerHost, l.perProc > 0
}

// Locate returns the address of a rank.
func (l *Layout) Locate(rank int) (Addr, error) {
	if rank < 0 || rank >= l.size {
		return Addr{}, fmt.Errorf("topo: rank %d out of range, want 0..%d", rank, l.size-1)
	}
	if l.perProc > 0 {
		p := rank / l.perProc
		return Addr{Host: p / l.procsPerHost, Proc: p, Local: rank - p*l.perProc}, nil
	}
	l.once.Do(l.buildIndex)
	p := int(l.bucket[rank>>l.shift])
	if rank >= int(l.procStart[p+1]) {
		p++
	}
	return Addr{Host: int(l.procHost[p]), Proc: p, Local: rank - int(l.procStart[p])}, nil
}

// Rank returns the global rank of the local-th rank of a proc: the inverse of Locate.
func (l *Layout) Rank(proc, local int) (int, error) {
	first, n, err := l.ProcRanks(proc)
	if err != nil {
		return 0, err
	}
	if local < 0 || local >= n {
		return 0, fmt.Errorf("topo: local rank %d out of range for proc %d, want 0..%d",
			local, proc, n-1)
	}
	return first + local, nil
}

// ProcRanks returns the ranks of a proc: first, first+1, ..., first+n-1.
func (l *Layout) ProcRanks(proc int) (first, n int, err error) {
	if proc < 0 || proc >= l.procs {
		return 0, 0, fmt.Errorf("topo: proc %d out of range, want 0..%d", proc, l.procs-1)
	}
	if l.perProc > 0 {
		return proc * l.perProc, l.perProc, nil
	}
	first = int(l.procStart[proc])
	return first, int(l.procStart[proc+1]) - first, nil
}

// HostOf returns the host a proc runs on.
func (l *Layout) HostOf(proc int) (int, error) {
	if proc < 0 || proc >= l.procs {
		return 0, fmt.Errorf("topo: proc %d out of range, want 0..%d", proc, l.procs-1)
	}
	if l.perProc > 0 {
		return proc / l.procsPerHost, nil
	}
	return int(l.procHost[proc]), nil
}

// HostProcs returns the procs of a host: first, first+1, ..., first+n-1.
func (l *Layout) HostProcs(host int) (first, n int, err error) {
	if host < 0 || host >= l.hosts {
		return 0, 0, fmt.Errorf("topo: host %d out of range, want 0..%d", host, l.hosts-1)
	}
	if l.perProc > 0 {
		return host * l.procsPerHost, l.procsPerHost, nil
	}
	first = int(l.hostStart[host])
	return first, int(l.hostStart[host+1]) - first, nil
}

// SameProc reports whether ranks a and b run in the same proc, so that a message between them
// is a copy in memory. It is false if either rank is out of range.
func (l *Layout) SameProc(a, b int) bool {
	pa, ok := l.procOf(a)
	if !ok {
		return false
	}
	pb, ok := l.procOf(b)
	return ok && pa == pb
}

// SameHost reports whether ranks a and b run on the same host, so that a message between them
// can go through shared memory. It is false if either rank is out of range.
func (l *Layout) SameHost(a, b int) bool {
	if l.perProc > 0 {
		if a < 0 || a >= l.size || b < 0 || b >= l.size {
			return false
		}
		perHost := l.perProc * l.procsPerHost
		return a/perHost == b/perHost
	}
	pa, ok := l.procOf(a)
	if !ok {
		return false
	}
	pb, ok := l.procOf(b)
	return ok && l.procHost[pa] == l.procHost[pb]
}

func (l *Layout) procOf(rank int) (int, bool) {
	a, err := l.Locate(rank)
	return a.Proc, err == nil
}

// Equal reports whether two layouts place every rank at the same address. Layouts built in
// different ways (Block, Uneven, Parse) are equal when their shapes are.
func (l *Layout) Equal(m *Layout) bool {
	if l == m {
		return true
	}
	if l == nil || m == nil || l.size != m.size || l.procs != m.procs || l.hosts != m.hosts {
		return false
	}
	if l.perProc > 0 && m.perProc > 0 {
		return l.perProc == m.perProc && l.procsPerHost == m.procsPerHost
	}
	for p := range l.procs {
		f1, n1, _ := l.ProcRanks(p)
		f2, n2, _ := m.ProcRanks(p)
		h1, _ := l.HostOf(p)
		h2, _ := m.HostOf(p)
		if f1 != f2 || n1 != n2 || h1 != h2 {
			return false
		}
	}
	return true
}

// String returns the layout in the form Parse reads: "[P;O;M]" for a uniform layout, else
// procs joined by '+' within a host and hosts by ',', e.g. "3+2,4".
func (l *Layout) String() string {
	if l == nil {
		return "<nil>"
	}
	if l.perProc > 0 {
		return fmt.Sprintf("[%d;%d;%d]", l.perProc, l.procsPerHost, l.hosts)
	}
	var b strings.Builder
	b.Grow(4 * l.procs)
	for h := range l.hosts {
		if h > 0 {
			b.WriteByte(',')
		}
		for p := l.hostStart[h]; p < l.hostStart[h+1]; p++ {
			if p > l.hostStart[h] {
				b.WriteByte('+')
			}
			b.WriteString(strconv.Itoa(int(l.procStart[p+1] - l.procStart[p])))
		}
	}
	return b.String()
}

// Parse reads a layout from a command line or an environment variable. Two forms:
//
//	[P;O;M]   P ranks per proc, O procs per host, M hosts, e.g. "[4;2;3]" (24 ranks)
//	3+2,4     explicit: ranks per proc, procs joined by '+', hosts by ','; this one is
//	          host 0 with procs of 3 and 2 ranks, host 1 with one proc of 4
//
// A single count such as "8" is one host with one proc of 8 ranks. Counts are decimal, without
// sign; spaces around counts and separators are allowed. Parse(l.String()) equals l.
func Parse(spec string) (*Layout, error) {
	l, err := parse(spec)
	if err != nil {
		return nil, fmt.Errorf("topo: parse %s: %w", quote(spec), err)
	}
	return l, nil
}

func parse(spec string) (*Layout, error) {
	s := strings.TrimSpace(spec)
	if s == "" {
		return nil, errors.New(`empty layout, want "[P;O;M]" or ranks per proc such as "3+2,4"`)
	}
	if strings.HasPrefix(s, "[") {
		if !strings.HasSuffix(s, "]") {
			return nil, errors.New(`missing closing "]", want "[P;O;M]"`)
		}
		f := strings.Split(s[1:len(s)-1], ";")
		if len(f) != 3 {
			return nil, fmt.Errorf(`%d counts between the brackets, want 3 as in "[P;O;M]"`, len(f))
		}
		var c [3]int
		for i, name := range []string{"P", "O", "M"} {
			n, err := parseCount(f[i])
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			c[i] = n
		}
		return block(c[0], c[1], c[2])
	}
	hs := strings.Split(s, ",")
	hosts := make([][]int, len(hs))
	for h, hspec := range hs {
		ps := strings.Split(hspec, "+")
		hosts[h] = make([]int, len(ps))
		for i, p := range ps {
			n, err := parseCount(p)
			if err != nil {
				return nil, fmt.Errorf("proc %d of host %d: %w", i, h, err)
			}
			hosts[h][i] = n
		}
	}
	return uneven(hosts)
}

// parseCount reads a decimal count in 0..MaxRanks; zero is left for the constructors to refuse
// with a message that names the count's role.
func parseCount(s string) (int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, errors.New(`missing count, want a number of at least 1`)
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%s is not a count, want decimal digits", quote(s))
		}
		d := int(c - '0')
		if n > (MaxRanks-d)/10 { // n*10+d would pass the limit (or overflow a 32-bit int)
			return 0, fmt.Errorf("count %s is more than the limit of %d ranks", quote(s), MaxRanks)
		}
		n = n*10 + d
	}
	return n, nil
}

// quote quotes a spec for an error message, cut short: a spec of a large uneven job may be
// megabytes long.
func quote(s string) string {
	const max = 48
	if len(s) > max {
		return strconv.Quote(s[:max]) + "..."
	}
	return strconv.Quote(s)
}
