//go:build !race

package xcoll

const raceEnabled = false
