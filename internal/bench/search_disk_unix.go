//go:build unix

package bench

import (
	"os"
	"syscall"
)

func fileBlocks(fi os.FileInfo) (uint64, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return uint64(st.Blocks) * 512, true
}
