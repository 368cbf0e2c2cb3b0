//go:build !unix

package bench

import "os"

func fileBlocks(os.FileInfo) (uint64, bool) { return 0, false }
