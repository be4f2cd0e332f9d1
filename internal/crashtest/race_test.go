//go:build race

package crashtest

// raceEnabled builds the chatd binary with -race too, so the server
// processes are checked for data races and the build reuses the test
// build's cache.
const raceEnabled = true
