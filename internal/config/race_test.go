//go:build race

package config

// raceSlowdown stretches time limits under the race detector, which
// slows the YAML parser several times over.
const raceSlowdown = 4
