//go:build race

package csvimport

// raceEnabled reports whether the race detector is on: it makes phonenumbers' validation about
// twenty times slower, so the long tests validate fewer numbers.
const raceEnabled = true
