package bench

import (
	"syscall"
	"testing"
	"time"
)

// processCPU returns the CPU time the whole process has used, user and
// system, on every thread: the benchmark's goroutines, the garbage
// collector's workers and, for the loopback benchmarks, the server's.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// measureCPU starts counting the process's CPU time and returns a function
// that reports it per op as cpu-ns/op. Wall time (sec/op) grows when other
// processes take the cores; CPU time mostly does not, so on a shared
// machine cpu-ns/op is the steadier measure of what a call costs. Call it
// after any untimed setup, and the returned function after the loop.
func measureCPU(b *testing.B) (stop func()) {
	start := processCPU()
	return func() {
		b.ReportMetric(float64(processCPU()-start)/float64(b.N), "cpu-ns/op")
	}
}
