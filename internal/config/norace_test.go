//go:build !race

package config

// raceSlowdown stretches time limits under the race detector (see
// race_test.go); without it they hold as written.
const raceSlowdown = 1
