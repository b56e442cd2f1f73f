package bench

// CPU time of a PostgreSQL server on this machine, read from /proc, so a
// bench run can say where a cycle's CPU goes: the bench process (clients,
// server, driver) or the database server. On two shared cores both come
// out of the same budget, which is what the ratios measure.

import (
	"bytes"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on every
// Linux architecture Go supports (the kernel fixes it for user space).
const clockTicks = 100

// localPostgres reports whether dbURL names a PostgreSQL server on this
// machine, whose processes /proc can see.
func localPostgres(dbURL string) bool {
	u, err := url.Parse(dbURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return false
	}
	host := u.Hostname()
	if h := u.Query().Get("host"); h != "" {
		host = h
	}
	if host == "" || host == "localhost" || filepath.IsAbs(host) {
		return true // the default or a Unix socket directory
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// postgresCPU is the CPU time (user + system) used so far by the
// processes named postgres — the postmaster, its background workers and
// every backend — plus what the postmaster's exited children used. ok is
// false when no such process is visible.
func postgresCPU() (cpu time.Duration, ok bool) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, false
	}
	var ticks int64
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone since the listing
		}
		// pid (comm) state ppid … : comm may hold spaces, so cut at the
		// last ')'.
		open, end := bytes.IndexByte(stat, '('), bytes.LastIndexByte(stat, ')')
		if open < 0 || end < open || string(stat[open+1:end]) != "postgres" {
			continue
		}
		fields := bytes.Fields(stat[end+1:])
		// fields[0] is the state (field 3); utime, stime, cutime and
		// cstime are fields 14–17.
		if len(fields) < 15 {
			continue
		}
		for _, f := range fields[11:15] {
			n, err := strconv.ParseInt(string(f), 10, 64)
			if err == nil && n > 0 {
				ticks += n
			}
		}
		ok = true
	}
	return time.Duration(ticks) * time.Second / clockTicks, ok
}

// localDBCPU reads the database server's CPU time when it runs on this
// machine and /proc shows it; nil otherwise.
func localDBCPU(dbURL string) func() time.Duration {
	if _, ok := postgresCPU(); !localPostgres(dbURL) || !ok {
		return nil
	}
	return func() time.Duration { cpu, _ := postgresCPU(); return cpu }
}
