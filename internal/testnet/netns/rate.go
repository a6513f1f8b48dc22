package netns

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseRate reads a bandwidth in tc's syntax, a positive number followed by
// bit, kbit, mbit, gbit or tbit (the prefixes are powers of 1000, in any
// case), and returns it in bits per second.
func ParseRate(s string) (float64, error) {
	num := strings.TrimRightFunc(s, func(r rune) bool { return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' })
	unit := strings.ToLower(s[len(num):])
	scale := map[string]float64{"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12}[unit]
	v, err := strconv.ParseFloat(num, 64)
	if scale == 0 || err != nil || !(v > 0) || v*scale > 1e13 {
		return 0, fmt.Errorf("netns: rate %q: want a positive number and a unit, bit, kbit, mbit, gbit or tbit, up to 10tbit (for example 1gbit)", s)
	}
	return v * scale, nil
}
