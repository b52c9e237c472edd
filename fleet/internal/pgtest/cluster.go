package pgtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
)

// Cluster is a throwaway PostgreSQL cluster that a test starts, stops and
// restarts at will: tests that stop the server must never touch the
// machine's shared one. It is not safe for concurrent use.
type Cluster struct {
	t    testing.TB
	bin  string
	dir  string
	port int
	as   []string // runuser -u postgres -- when root: initdb refuses root
}

// NewCluster initdbs a cluster in a temporary directory and starts it on a
// free loopback port; it is stopped and removed when t ends. Without
// initdb the test is skipped, unless Required: then it fails.
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	bin := postgresBin()
	if bin == "" {
		if Required() {
			t.Fatal("pgtest: no initdb under /usr/lib/postgresql/*/bin, and CI asks for the stop-the-server tests")
		}
		t.Skip("pgtest: no initdb under /usr/lib/postgresql/*/bin")
	}
	c := &Cluster{t: t, bin: bin}
	dir, err := os.MkdirTemp("", "grantretry-pgtest-")
	if err != nil {
		t.Fatal(err)
	}
	c.dir = dir
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			if Required() {
				t.Fatalf("pgtest: running as root and there is no user postgres to own the cluster, and CI asks for the stop-the-server tests: %v", err)
			}
			t.Skipf("pgtest: running as root and there is no user postgres to own the cluster: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		c.as = []string{"runuser", "-u", "postgres", "--"}
	}
	if c.port, err = freePort(); err != nil {
		t.Fatal(err)
	}
	c.run("initdb", "-D", c.data(), "-U", "postgres", "-A", "trust", "--no-sync")
	c.Start()
	t.Cleanup(func() { c.pgctl("-m", "immediate", "stop") })
	return c
}

// DSN returns the DSN of the cluster's postgres database.
func (c *Cluster) DSN() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

// Start starts the cluster and waits until it accepts connections.
func (c *Cluster) Start() {
	c.t.Helper()
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -c port=%d -c unix_socket_directories=%s -c fsync=off", c.port, c.dir)
	c.pgctl("-l", filepath.Join(c.dir, "log"), "-w", "-o", opts, "start")
}

// Stop stops the cluster the way an operator or a crash would end it:
// "fast" ends every session at once, "immediate" also skips the
// checkpoint.
func (c *Cluster) Stop(mode string) {
	c.t.Helper()
	c.pgctl("-m", mode, "-w", "stop")
}

func (c *Cluster) data() string { return filepath.Join(c.dir, "data") }

func (c *Cluster) pgctl(args ...string) {
	c.t.Helper()
	c.run("pg_ctl", append([]string{"-D", c.data(), "-s"}, args...)...)
}

func (c *Cluster) run(prog string, args ...string) {
	c.t.Helper()
	argv := append(append(append([]string(nil), c.as...), filepath.Join(c.bin, prog)), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	if out, err := cmd.CombinedOutput(); err != nil {
		c.t.Fatalf("pgtest: %s %v: %v\n%s", prog, args, err, out)
	}
}

// postgresBin is the newest /usr/lib/postgresql/N/bin with an initdb.
func postgresBin() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) < version(dirs[j]) })
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "initdb")); err == nil {
			return dirs[i]
		}
	}
	return ""
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// freePort asks the kernel for a free loopback port. Another process may
// take it before the cluster does; the start then fails loudly.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
