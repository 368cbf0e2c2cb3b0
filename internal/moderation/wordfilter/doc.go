// Package wordfilter is Parley's built-in word filter.
package wordfilter
