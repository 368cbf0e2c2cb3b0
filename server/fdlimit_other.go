//go:build !unix

package server

// processFileLimit is unknown here: no descriptor reserve by default.
func processFileLimit() int { return 0 }
