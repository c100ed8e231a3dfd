//go:build race

package runners

const raceEnabled = true
