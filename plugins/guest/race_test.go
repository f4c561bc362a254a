//go:build race

package main

// raceEnabled: the race detector multiplies CPU time, so CPU budgets are
// not checked under it.
const raceEnabled = true
