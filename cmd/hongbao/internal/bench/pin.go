package bench

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
)

// Pinning keeps Redis and the bench off each other's cores, so that neither
// steals the other's CPU and Redis's CPU time is its own work.
type Pinning struct {
	// RedisCPUs is the CPU list for our redis-server (taskset -c).
	RedisCPUs string
	// BenchCPUs is the CPU list this process now runs on.
	BenchCPUs string
	before    string
}

// Pin moves every thread of this process onto all allowed CPUs but the
// first, leaving the first for Redis. It needs two or more CPUs and
// taskset; otherwise it returns an error saying why and changes nothing.
// Go starts new threads from pinned ones, so they inherit the mask.
// GOMAXPROCS is set to the CPUs left at once (the runtime would notice the
// new mask only later, possibly in the middle of a run). Restore undoes
// both.
func Pin() (*Pinning, error) {
	if runtime.NumCPU() < 2 {
		return nil, errors.New("one CPU only")
	}
	ts, err := exec.LookPath("taskset")
	if err != nil {
		return nil, errors.New("taskset is not installed")
	}
	before, err := allowedCPUs()
	if err != nil {
		return nil, err
	}
	cpus, err := parseCPUList(before)
	if err != nil {
		return nil, err
	}
	if len(cpus) < 2 {
		return nil, fmt.Errorf("only CPUs %s are allowed", before)
	}
	p := &Pinning{RedisCPUs: strconv.Itoa(cpus[0]), BenchCPUs: formatCPUList(cpus[1:]), before: before}
	if out, err := exec.Command(ts, "-a", "-cp", p.BenchCPUs, strconv.Itoa(os.Getpid())).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("taskset: %v: %s", err, strings.TrimSpace(string(out)))
	}
	runtime.GOMAXPROCS(len(cpus) - 1)
	return p, nil
}

// String says where things run, for reports.
func (p *Pinning) String() string {
	return "redis on cpu " + p.RedisCPUs + ", bench on " + plural("cpu", p.BenchCPUs) + " " + p.BenchCPUs
}

func plural(word, list string) string {
	if strings.ContainsAny(list, ",-") {
		return word + "s"
	}
	return word
}

// Restore gives this process back the CPUs it had before Pin.
func (p *Pinning) Restore() {
	if p == nil {
		return
	}
	if ts, err := exec.LookPath("taskset"); err == nil {
		_ = exec.Command(ts, "-a", "-cp", p.before, strconv.Itoa(os.Getpid())).Run()
	}
	runtime.SetDefaultGOMAXPROCS()
}

func allowedCPUs() (string, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(rest), nil
		}
	}
	return "", errors.New("no Cpus_allowed_list in /proc/self/status")
}

// parseCPUList reads a list like "0-3,6,8-9".
func parseCPUList(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("cpu list %q: %w", s, err)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("cpu list %q: bad range %q", s, part)
			}
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	return out, nil
}

// formatCPUList writes sorted CPUs compactly: 1-3,5.
func formatCPUList(cpus []int) string {
	var sb strings.Builder
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if sb.Len() > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(strconv.Itoa(cpus[i]))
		if j > i {
			sb.WriteString("-" + strconv.Itoa(cpus[j]))
		}
		i = j + 1
	}
	return sb.String()
}
