package gateway

import (
	"encoding/binary"
	"syscall"
)

// openFDs counts the process's open file descriptors by listing
// /proc/self/fd without allocating a name per entry. -1 when it cannot.
func openFDs() int {
	fd, err := syscall.Open("/proc/self/fd", syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	defer syscall.Close(fd)
	var buf [16 << 10]byte
	n := 0
	for {
		m, err := syscall.ReadDirent(fd, buf[:])
		if err != nil {
			return -1
		}
		if m <= 0 {
			break
		}
		// linux_dirent64: ino u64, off s64, reclen u16, type u8, name.
		for b := buf[:m]; len(b) >= 20; {
			reclen := int(binary.NativeEndian.Uint16(b[16:18]))
			if reclen <= 0 || reclen > len(b) {
				return -1
			}
			if name := b[19]; name != '.' { // skip "." and ".."
				n++
			}
			b = b[reclen:]
		}
	}
	return n - 1 // the descriptor listing them
}
