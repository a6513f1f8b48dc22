package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Markdown is the suite's section of a report: how the figures were made
// (date, machine, peers, launch lines, rounds, command), then the table of
// medians, failures and plots. svgDir is where the plots are, relative to
// the file the section goes into ("" for none drawn).
func (r *Result) Markdown(svgDir string, plots []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## %s\n\n", r.Title)
	fmt.Fprintf(&b, "Written by `%s`; do not edit between the markers.\n\n", r.Command)
	if a := strings.TrimSpace(r.suite.About); a != "" {
		b.WriteString(a + "\n\n")
	}
	m := r.Machine
	fmt.Fprintf(&b, "- Date: %s; %d round(s), interleaved (weft, then each peer, test after test), %.0f s in all\n",
		r.Started.Format("2006-01-02 15:04 UTC"), r.Rounds, r.Seconds)
	fmt.Fprintf(&b, "- Machine: %s\n", m.Summary())
	limits := fmt.Sprintf("Go copy() of 4 MiB %s GB/s", FormatValue(m.CopyGBs))
	if m.HandoffNs > 0 {
		limits += fmt.Sprintf("; round trip of two goroutines spinning on one word %s ns", FormatValue(m.HandoffNs))
	}
	fmt.Fprintf(&b, "- Machine's limits, measured at the start: %s\n", limits)
	if m.LoadStart != "" {
		fmt.Fprintf(&b, "- Load average (1, 5, 15 min): %s at the start, %s at the end (our own runs count in the latter)\n", m.LoadStart, m.LoadEnd)
	}
	if m.Waited > 0 {
		fmt.Fprintf(&b, "- Others' share of the CPUs in a 1 s pause before each test: at most %d%%; %.0f s spent waiting for them", m.OthersMax, m.Waited)
		if m.Loaded > 0 {
			fmt.Fprintf(&b, "; **%d test(s) started under load: do not quote their figures**", m.Loaded)
		}
		b.WriteString("\n")
	}
	b.WriteString("- Peers:")
	if r.weftOnly() == len(r.Tests) {
		b.WriteString(" none: every test of this suite runs Weft alone")
	} else if len(r.Peers) == 0 {
		b.WriteString(" none asked for (--peers none)")
	}
	for i, p := range r.peers() {
		sep := ";"
		if i == len(r.Peers)-1 {
			sep = ""
		}
		if p.Status == "ok" {
			fmt.Fprintf(&b, " %s (`bench/peers/%s` built with `%s -O2`)%s", p.Note(), r.suite.Twin, p.CC, sep)
		} else {
			fmt.Fprintf(&b, " **%s**%s", p.Note(), sep)
		}
	}
	b.WriteString("\n")
	b.WriteString("- Launch: weft: `weft " + WorkerCommand + " " + r.Suite + " ARGS` with `WEFT_NP=N` (all ranks in one process), or `weft run -n N --per-proc P` for tests across processes")
	for _, p := range r.peers() {
		if p.Status != "ok" {
			continue
		}
		fmt.Fprintf(&b, "; %s: `%s N %s ARGS`", p.Name, strings.Join(p.Shm, " "), filepath.Base(p.Bin))
		if !slices.Equal(p.Shm, p.TCP) && r.anyTCP() {
			fmt.Fprintf(&b, ", over TCP `%s N %s ARGS`", strings.Join(p.TCP, " "), filepath.Base(p.Bin))
		}
	}
	b.WriteString("\n")
	if r.Quick {
		b.WriteString("- **--quick: a smoke test with few iterations; do not quote these figures.**\n")
	}
	if weftOnly := r.weftOnly(); weftOnly > 0 && weftOnly < len(r.Tests) {
		fmt.Fprintf(&b, "- %d test(s) run Weft only (no peer can run them here); their peer cells say \"weft only\".\n", weftOnly)
	}
	b.WriteString("\n")
	r.writeTable(&b)
	if fails := r.failures(); len(fails) > 0 {
		b.WriteString("\nRuns that did not succeed:\n\n")
		for _, f := range fails {
			fmt.Fprintf(&b, "- round %d, %s, %s: **%s**", f.Round, strings.Join(r.Tests[f.Test].Args, " "), f.Impl, f.Status)
			if f.Note != "" {
				fmt.Fprintf(&b, " (%s)", f.Note)
			}
			fmt.Fprintf(&b, ": `%s`", f.Command)
			if f.Stderr != "" {
				fmt.Fprintf(&b, "; stderr: `%s`", strings.ReplaceAll(f.Stderr, "`", "'"))
			}
			b.WriteString("\n")
		}
	}
	for i, file := range plots {
		fmt.Fprintf(&b, "\n![%s](%s)\n", r.suite.Plots[i].Title, filepath.ToSlash(filepath.Join(svgDir, file)))
	}
	return b.String()
}

func (r *Result) anyTCP() bool {
	return slices.ContainsFunc(r.Tests, func(t Test) bool { return t.TCP && !t.Weft })
}

// peers are the peers the report shows: none when every test runs Weft
// alone.
func (r *Result) peers() []*Peer {
	if r.weftOnly() == len(r.Tests) {
		return nil
	}
	return r.Peers
}

func (r *Result) weftOnly() int {
	n := 0
	for _, t := range r.Tests {
		if t.Weft {
			n++
		}
	}
	return n
}

// failures are the runs made that did not succeed.
func (r *Result) failures() []Run {
	var fs []Run
	for _, run := range r.Runs {
		if run.Failed() {
			fs = append(fs, run)
		}
	}
	return fs
}

// WeftFailures counts Weft's runs that did not succeed.
func (r *Result) WeftFailures() int {
	n := 0
	for _, f := range r.failures() {
		if f.Impl == Weft {
			n++
		}
	}
	return n
}

// writeTable writes the medians: a column per implementation, weft over the
// best peer, its range over the rounds, and which way is better.
func (r *Result) writeTable(b *strings.Builder) {
	impls := []string{Weft}
	for _, p := range r.peers() {
		impls = append(impls, p.Name)
	}
	alone := len(impls) == 1
	if alone {
		fmt.Fprintf(b, "Each cell is the median over %d round(s).\n\n| test | weft | better |\n|---|---:|---|\n", r.Rounds)
	} else {
		fmt.Fprintf(b, "Each cell is the median over %d round(s); weft/best peer is Weft's median over the better peer's, and \"per round\" its range round by round.\n\n", r.Rounds)
		b.WriteString("| test |")
		for _, i := range impls {
			b.WriteString(" " + i + " |")
		}
		b.WriteString(" weft/best peer | per round | better |\n|---|")
		for range impls {
			b.WriteString("---:|")
		}
		b.WriteString("---:|---:|---|\n")
	}
	for _, row := range r.Table {
		b.WriteString("| " + row.Label + " |")
		for _, i := range impls {
			cell := "-"
			if v, ok := row.Medians[i]; ok {
				cell = FormatValue(v)
			} else if why := row.Missing[i]; why != "" {
				cell = why
			}
			b.WriteString(" " + cell + " |")
		}
		if alone {
			b.WriteString(" " + row.Better + " |\n")
			continue
		}
		ratio, span := "-", "-"
		if row.Ratio != nil {
			ratio = FormatValue(*row.Ratio) + " (" + row.BestPeer + ")"
		}
		if len(row.RoundRatios) > 1 {
			span = FormatValue(slices.Min(row.RoundRatios)) + "-" + FormatValue(slices.Max(row.RoundRatios))
		}
		b.WriteString(" " + ratio + " | " + span + " | " + row.Better + " |\n")
	}
}

// Write puts the suite's results in dir: SUITE.json, SUITE.md and an SVG per
// plot with data. It returns the files written.
func (r *Result) Write(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var files []string
	var plots []string
	for _, p := range r.suite.Plots {
		svg, ok := PlotSVG(p, r.Lines)
		if !ok {
			continue
		}
		name := p.File + ".svg"
		if err := os.WriteFile(filepath.Join(dir, name), svg, 0o644); err != nil {
			return files, err
		}
		files = append(files, filepath.Join(dir, name))
		plots = append(plots, name)
	}
	r.plotFiles = plots
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return files, err
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{r.Suite + ".json", js}, {r.Suite + ".md", []byte(r.Markdown("", plots))}} {
		if err := os.WriteFile(filepath.Join(dir, f.name), f.data, 0o644); err != nil {
			return files, err
		}
		files = append(files, filepath.Join(dir, f.name))
	}
	return files, nil
}

// UpdateDoc replaces the suite's section in the Markdown file doc (between
// <!-- bench:SUITE:begin --> and <!-- bench:SUITE:end -->, appended when
// absent) with this result, its plots linked from outDir.
func (r *Result) UpdateDoc(doc, outDir string) error {
	old, err := os.ReadFile(doc)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	svgDir := outDir
	if absDoc, err1 := filepath.Abs(filepath.Dir(doc)); err1 == nil {
		if absOut, err2 := filepath.Abs(outDir); err2 == nil {
			if rel, err3 := filepath.Rel(absDoc, absOut); err3 == nil {
				svgDir = rel
			}
		}
	}
	return os.WriteFile(doc, ReplaceSection(old, r.Suite, r.Markdown(svgDir, r.plotFiles)), 0o644)
}

// ReplaceSection returns doc with the text between the suite's markers
// replaced by section; markers that are absent are appended first. Text
// outside the markers is kept byte for byte.
func ReplaceSection(doc []byte, suite, section string) []byte {
	begin := "<!-- bench:" + suite + ":begin -->"
	end := "<!-- bench:" + suite + ":end -->"
	i := bytes.Index(doc, []byte(begin))
	j := -1
	if i >= 0 {
		if k := bytes.Index(doc[i:], []byte(end)); k >= 0 {
			j = i + k
		}
	}
	if i < 0 || j < 0 {
		var b bytes.Buffer
		b.Write(doc)
		if len(doc) > 0 && !bytes.HasSuffix(doc, []byte("\n")) {
			b.WriteString("\n")
		}
		if len(doc) > 0 {
			b.WriteString("\n")
		}
		b.WriteString(begin + "\n" + end + "\n")
		doc = b.Bytes()
		i = bytes.Index(doc, []byte(begin))
		j = i + bytes.Index(doc[i:], []byte(end))
	}
	var b bytes.Buffer
	b.Write(doc[:i+len(begin)])
	b.WriteString("\n" + strings.TrimRight(section, "\n") + "\n")
	b.Write(doc[j:])
	return b.Bytes()
}
