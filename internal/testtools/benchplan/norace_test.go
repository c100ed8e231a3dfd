//go:build !race

package benchplan

// raceEnabled: the test binary runs under the race detector, where allocation figures are not deterministic.
const raceEnabled = false
