//go:build !race

package csvimport

// raceEnabled reports whether the race detector is on.
const raceEnabled = false
