package bench

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// clockTicks is USER_HZ, the unit of utime/stime in /proc/PID/stat; 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// procUsage reads a process's CPU time and resident memory from /proc.
func procUsage(pid int) (cpu time.Duration, rss uint64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	// The command name (field 2) may hold spaces and parentheses: the
	// fields after it start past the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, errors.New("bench: unreadable /proc stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 22 {
		return 0, 0, errors.New("bench: short /proc stat")
	}
	utime, _ := strconv.ParseUint(f[11], 10, 64) // field 14
	stime, _ := strconv.ParseUint(f[12], 10, 64) // field 15
	cpu = time.Duration(utime+stime) * time.Second / clockTicks
	sm, err := os.ReadFile(fmt.Sprintf("/proc/%d/statm", pid))
	if err != nil {
		return 0, 0, err
	}
	g := strings.Fields(string(sm))
	if len(g) < 2 {
		return 0, 0, errors.New("bench: short /proc statm")
	}
	pages, _ := strconv.ParseUint(g[1], 10, 64)
	return cpu, pages * uint64(os.Getpagesize()), nil
}

// serverSample is the server's usage during the second ending at T.
type serverSample struct {
	T          float64
	CPUPercent float64
	RSS        uint64
}

// serverSampler samples a server process once a second.
type serverSampler struct {
	pid    int
	start  time.Time
	stop   chan struct{}
	done   chan struct{}
	mu     sync.Mutex // guards the fields below
	base   uint64
	last   serverSample
	series []serverSample
}

// startServerSampler takes the baseline now and samples until close.
func startServerSampler(pid int) (*serverSampler, error) {
	cpu, rss, err := procUsage(pid)
	if err != nil {
		return nil, err
	}
	s := &serverSampler{pid: pid, start: time.Now(), stop: make(chan struct{}), done: make(chan struct{}), base: rss}
	s.last = serverSample{RSS: rss}
	go s.loop(cpu)
	return s, nil
}

func (s *serverSampler) loop(prevCPU time.Duration) {
	defer close(s.done)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	prevT := s.start
	take := func(now time.Time) bool {
		cpu, rss, err := procUsage(s.pid)
		if err != nil {
			return false // the server exited
		}
		smp := serverSample{
			T:          now.Sub(s.start).Seconds(),
			CPUPercent: 100 * (cpu - prevCPU).Seconds() / now.Sub(prevT).Seconds(),
			RSS:        rss,
		}
		prevCPU, prevT = cpu, now
		s.mu.Lock()
		s.last = smp
		s.series = append(s.series, smp)
		s.mu.Unlock()
		return true
	}
	for {
		select {
		case <-s.stop:
			// A last, partial second, so that short runs get a sample;
			// CPU over a sliver is noise, so only past 200 ms.
			if now := time.Now(); now.Sub(prevT) > 200*time.Millisecond {
				take(now)
			}
			return
		case now := <-t.C:
			if !take(now) {
				return
			}
		}
	}
}

func (s *serverSampler) latest() serverSample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// close stops sampling and returns the baseline and the samples.
func (s *serverSampler) close() (base uint64, series []serverSample) {
	close(s.stop)
	<-s.done
	return s.base, s.series
}

// ListenerPID finds the local process listening on TCP port, through
// /proc/net/tcp{,6} and the socket links in /proc/*/fd. It sees only the
// processes this user may inspect.
func ListenerPID(port int) (int, error) {
	inodes := map[string]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			// sl local_address rem_address st ... inode (field 10)
			if len(fs) < 10 || fs[3] != "0A" { // 0A: LISTEN
				continue
			}
			i := strings.LastIndexByte(fs[1], ':')
			if p, err := strconv.ParseUint(fs[1][i+1:], 16, 16); err == nil && int(p) == port {
				inodes["socket:["+fs[9]+"]"] = true
			}
		}
		fh.Close()
	}
	if len(inodes) == 0 {
		return 0, fmt.Errorf("bench: nothing listens on port %d", port)
	}
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		fds, _ := os.ReadDir(p + "/fd")
		for _, fd := range fds {
			if l, err := os.Readlink(p + "/fd/" + fd.Name()); err == nil && inodes[l] {
				return strconv.Atoi(filepath.Base(p))
			}
		}
	}
	return 0, fmt.Errorf("bench: the process listening on port %d is not visible", port)
}
