//go:build !race

package jsonb

const raceEnabled = false
