//go:build unix

package server

import (
	"math"
	"syscall"
)

// processFileLimit is the process's soft RLIMIT_NOFILE (Go raises it to the
// hard limit at start), or 0 when unknown or unlimited.
func processFileLimit() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == math.MaxUint64 || rl.Cur > math.MaxInt32 {
		return 0
	}
	return int(rl.Cur)
}
