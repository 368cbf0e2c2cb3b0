//go:build !race

package server_test

// raceDetector: the tests run under the race detector.
const raceDetector = false
