// Command docsamples regenerates the command-line transcripts that
// docs/audit-trail.md and docs/dead-letters.md quote: it writes a real
// audit trail and a real dead-letter directory through a Transport, runs
// the grantretry commands those pages show against them, and prints each
// transcript as the pages quote it. Run it from the repository root:
//
//	go run ./internal/docsamples [-cli path/to/grantretry] [-keep]
//
// The funders are loopback servers; the letters' funder speaks HTTPS under
// its real name through a local proxy and a certificate authority made for
// the run, so "grantretry deadletter redeliver" runs unchanged. The clock
// and the jitter are fixed: what changes between runs is latencies,
// random IDs and hashes; but the runbook's letters are written on a clock
// three hours behind the system's, whose time the command judges them
// by (due, late), so their times are those of the run.
package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/deadletter"
	"github.com/grantretry/grantretry/trail"
)

func main() {
	cli := flag.String("cli", "", "the grantretry binary to run (default: built from ./cmd/grantretry)")
	keep := flag.Bool("keep", false, "keep the working directory and print its path")
	flag.Parse()
	if err := run(*cli, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "docsamples:", err)
		os.Exit(1)
	}
}

func run(cli string, keep bool) error {
	work, err := os.MkdirTemp("", "grantretry-docsamples-")
	if err != nil {
		return err
	}
	if keep {
		fmt.Println("# working directory:", work)
	} else {
		defer os.RemoveAll(work)
	}
	if cli == "" {
		cli = filepath.Join(work, "grantretry")
		build := exec.Command("go", "build", "-o", cli, "./cmd/grantretry")
		build.Stderr = os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("building the command: %w", err)
		}
	}
	if cli, err = filepath.Abs(cli); err != nil {
		return err
	}
	if err := trailSamples(cli, filepath.Join(work, "trail")); err != nil {
		return fmt.Errorf("trail: %w", err)
	}
	if err := letterSamples(cli, filepath.Join(work, "letters")); err != nil {
		return fmt.Errorf("letters: %w", err)
	}
	if err := runbookSamples(cli, filepath.Join(work, "runbook")); err != nil {
		return fmt.Errorf("runbook: %w", err)
	}
	return nil
}

// clock is a grantretry.Clock whose waits return at once and move it on.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Sleep(ctx context.Context, d time.Duration) error {
	c.set(c.Now().Add(d))
	return ctx.Err()
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// dialTo is a transport that reaches every host at addr.
func dialTo(addr string, tlsConfig *tls.Config) *http.Transport {
	var d net.Dialer
	return &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, addr)
		},
		TLSClientConfig: tlsConfig,
	}
}

// shell runs the command in dir with env added, and prints it as a shell
// session would show it: the command line as shown, then its output, and
// "echo $?" when withStatus is set.
func shell(cli, dir string, env []string, shown string, withStatus bool, args ...string) error {
	cmd := exec.Command(cli, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	var xerr *exec.ExitError
	switch {
	case errors.As(err, &xerr):
		code = xerr.ExitCode()
	case err != nil:
		return err
	}
	fmt.Printf("$ %s\n%s", shown, out.String())
	if withStatus {
		fmt.Printf("$ echo $?\n%d\n", code)
	}
	fmt.Println()
	return nil
}

// shellPipe runs script with sh in dir, env added and $GRANTRETRY naming
// the command, and prints it as shell would show it, with "grantretry" in
// place of "$GRANTRETRY".
func shellPipe(cli, dir string, env []string, script string) error {
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), env...), "GRANTRETRY="+cli)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w\n%s", script, err, out)
	}
	fmt.Printf("$ %s\n%s\n", strings.ReplaceAll(script, `"$GRANTRETRY"`, "grantretry"), out)
	return nil
}

func section(title string) { fmt.Printf("==== %s\n\n", title) }

// glob returns the files matching pattern in dir, sorted as a shell sorts
// them.
func glob(dir, pattern string) []string {
	names, _ := filepath.Glob(filepath.Join(dir, pattern))
	for i, n := range names {
		names[i] = filepath.Base(n)
	}
	sort.Strings(names)
	return names
}

// tracedCall is one submission of the trail sample and its funder's answers.
type tracedCall struct {
	n       int
	answers []int
}

var trailCalls = []tracedCall{
	{7, []int{201}},
	{13, []int{422}},
	{42, []int{503, 429, 201}},
	{51, []int{201}},
	{68, []int{201}},
}

// trailSamples writes the trail of docs/audit-trail.md: five submissions
// through a Transport to a funder stub, rotated at 4 KiB; then verifies,
// traces and tampers with it.
func trailSamples(cli, dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	var mu sync.Mutex
	script := map[string][]int{}
	funder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		id := r.Header.Get(grantretry.HeaderCorrelationID)
		code := script[id][0]
		if len(script[id]) > 1 {
			script[id] = script[id][1:]
		}
		mu.Unlock()
		if code == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "3")
		}
		w.WriteHeader(code)
	}))
	defer funder.Close()
	clk := &clock{now: time.Date(2026, 11, 30, 14, 2, 48, 0, time.UTC)}
	live := filepath.Join(dir, "trail.jsonl")
	sink, err := trail.Open(live, trail.Options{MaxFileSize: 4 << 10, Clock: clk})
	if err != nil {
		return err
	}
	tr := grantretry.New(dialTo(funder.Listener.Addr().String(), nil),
		grantretry.WithAuditTrail(sink), grantretry.WithClock(clk), grantretry.WithRandSource(mrand.NewPCG(2026, 1130)))
	client := &http.Client{Transport: tr}
	for i, c := range trailCalls {
		clk.set(clk.Now().Add(time.Duration(i*41) * time.Second))
		corr := fmt.Sprintf("c0ffee-%04d", c.n)
		mu.Lock()
		script[corr] = c.answers
		mu.Unlock()
		ctx := grantretry.WithSubmissionID(context.Background(), fmt.Sprintf("GRANT-2026-%04d", c.n))
		body := fmt.Sprintf(`{"opportunity":"HHS-2026-ACF-0042","applicant":"Example Foundation","amount":%d}`, 100000+c.n)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://apply.grants.example.gov/v1/applications", strings.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set(grantretry.HeaderCorrelationID, corr)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
	}
	if err := sink.Close(); err != nil {
		return err
	}
	return trailTranscripts(cli, dir)
}

func trailTranscripts(cli, dir string) error {
	files := glob(dir, "trail.jsonl*")
	section("audit-trail.md: files")
	head, err := os.ReadFile(filepath.Join(dir, "trail.jsonl.head"))
	if err != nil {
		return err
	}
	fmt.Printf("%s\n%s\n", strings.Join(files, " "), head)
	if err := recordSamples(dir); err != nil {
		return err
	}
	section("audit-trail.md: verify")
	if err := shell(cli, dir, nil, "grantretry audit verify trail.jsonl*", true, append([]string{"audit", "verify"}, files...)...); err != nil {
		return err
	}
	section("audit-trail.md: trace")
	if err := shell(cli, dir, nil, "grantretry audit trace trail.jsonl* -submission GRANT-2026-0042", false,
		append(append([]string{"audit", "trace"}, files...), "-submission", "GRANT-2026-0042")...); err != nil {
		return err
	}
	edited := dir + "-edited"
	if err := copyDir(dir, edited); err != nil {
		return err
	}
	where, err := editFirst(edited, `"status":422`, `"status":201`)
	if err != nil {
		return err
	}
	section("audit-trail.md: verify after editing the status of " + where + " (422 to 201)")
	if err := shell(cli, edited, nil, "grantretry audit verify trail.jsonl*", true, append([]string{"audit", "verify"}, files...)...); err != nil {
		return err
	}
	missing := dir + "-missing"
	if err := copyDir(dir, missing); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(missing, "trail.jsonl.000002")); err != nil {
		return err
	}
	section("audit-trail.md: verify after removing trail.jsonl.000002")
	return shell(cli, missing, nil, "grantretry audit verify trail.jsonl*", true, append([]string{"audit", "verify"}, glob(missing, "trail.jsonl*")...)...)
}

// recordSamples prints the disposition record of the call the funder
// refused, and the size of the Transport's records.
func recordSamples(dir string) error {
	var sizes = map[string][]int{}
	var refused string
	for _, f := range glob(dir, "trail.jsonl*") {
		if strings.HasSuffix(f, ".head") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return err
		}
		for _, line := range strings.SplitAfter(string(data), "\n") {
			for _, msg := range []string{grantretry.MsgAttempt, grantretry.MsgDisposition} {
				if strings.Contains(line, `"msg":"`+msg+`"`) {
					sizes[msg] = append(sizes[msg], len(line))
				}
			}
			if strings.Contains(line, `"msg":"`+grantretry.MsgDisposition+`"`) && strings.Contains(line, `"status":422`) {
				refused = line
			}
		}
	}
	section("audit-trail.md: a disposition record")
	fmt.Println(refused)
	for _, msg := range []string{grantretry.MsgAttempt, grantretry.MsgDisposition} {
		fmt.Printf("%s records: %v bytes\n", msg, sizes[msg])
	}
	fmt.Println()
	return nil
}

// editFirst replaces old by new in the first line of the trail in dir
// that has it, and says where that was.
func editFirst(dir, old, new string) (string, error) {
	for _, f := range glob(dir, "trail.jsonl.0*") {
		path := filepath.Join(dir, f)
		data, err := os.ReadFile(path)
		if err != nil {
			return "", err
		}
		lines := strings.SplitAfter(string(data), "\n")
		for i, l := range lines {
			if strings.Contains(l, old) {
				lines[i] = strings.Replace(l, old, new, 1)
				return fmt.Sprintf("%s line %d", f, i+1), os.WriteFile(path, []byte(strings.Join(lines, "")), 0o600)
			}
		}
	}
	return "", fmt.Errorf("no line has %s", old)
}

func copyDir(from, to string) error {
	if err := os.MkdirAll(to, 0o700); err != nil {
		return err
	}
	entries, err := os.ReadDir(from)
	if err != nil {
		return err
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

const (
	portalHost  = "portal.example-foundation.org"
	portalToken = "Bearer pipeline-token-2026"
	portalKey   = "k-123-live-0a1b"
)

// portal is the letters' funder: down (503 to everything) until up is
// set; then it takes an application with credentials and refuses the
// report.
type portal struct {
	mu sync.Mutex
	up bool
}

func (p *portal) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	p.mu.Lock()
	up := p.up
	p.mu.Unlock()
	switch {
	case !up:
		http.Error(w, "maintenance", http.StatusServiceUnavailable)
	case r.Header.Get("Authorization") == "" || r.Header.Get("X-Api-Key") == "":
		http.Error(w, "no credentials", http.StatusUnauthorized)
	case r.Method == http.MethodPost && r.URL.Path == "/api/v2/applications":
		w.WriteHeader(http.StatusCreated)
	default:
		http.Error(w, "the report's period is closed", http.StatusUnprocessableEntity)
	}
}

// letterSink hands letters to the directory while on is set, and drops
// them otherwise.
type letterSink struct {
	mu  sync.Mutex
	on  bool
	dir *deadletter.Dir
}

func (s *letterSink) PutDeadLetter(ctx context.Context, l *grantretry.Letter) error {
	s.mu.Lock()
	on := s.on
	s.mu.Unlock()
	if !on {
		return nil
	}
	return s.dir.PutDeadLetter(ctx, l)
}

func (s *letterSink) set(on bool) {
	s.mu.Lock()
	s.on = on
	s.mu.Unlock()
}

// tlsFunder is a funder that speaks HTTPS under portalHost, reached by
// the command through a local proxy (HTTPS_PROXY) and a certificate
// authority made for the run (SSL_CERT_FILE), and by the samples' own
// Transports through inner.
type tlsFunder struct {
	server, proxy *httptest.Server
	caFile        string
	inner         *http.Transport
}

// startFunder starts h as a tlsFunder, its certificate authority written
// into work.
func startFunder(work string, h http.Handler) (*tlsFunder, error) {
	ca, leaf, err := certificates()
	if err != nil {
		return nil, err
	}
	caFile := filepath.Join(work, "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw}), 0o600); err != nil {
		return nil, err
	}
	server := httptest.NewUnstartedServer(h)
	server.TLS = &tls.Config{Certificates: []tls.Certificate{leaf}}
	server.StartTLS()
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return &tlsFunder{
		server: server,
		proxy:  httptest.NewServer(tunnel(server.Listener.Addr().String())),
		caFile: caFile,
		inner:  dialTo(server.Listener.Addr().String(), &tls.Config{RootCAs: pool}),
	}, nil
}

func (f *tlsFunder) close() {
	f.proxy.Close()
	f.server.Close()
}

// env is the command's environment: the proxy, the certificate
// authority, and the operator's credentials.
func (f *tlsFunder) env() []string {
	return []string{"HTTPS_PROXY=" + f.proxy.URL, "NO_PROXY=", "no_proxy=", "SSL_CERT_FILE=" + f.caFile,
		"FUNDER_TOKEN=" + portalToken, "FUNDER_API_KEY=" + portalKey}
}

// letterSamples writes the two letters of docs/dead-letters.md through
// Transports, then lists, shows and redelivers them with the command.
func letterSamples(cli, work string) error {
	if err := os.MkdirAll(work, 0o700); err != nil {
		return err
	}
	p := &portal{}
	funder, err := startFunder(work, p)
	if err != nil {
		return err
	}
	defer funder.close()

	dir, err := deadletter.Open(filepath.Join(work, "dead-letters"))
	if err != nil {
		return err
	}
	inner := funder.inner
	sink := &letterSink{dir: dir, on: true}
	clk := &clock{now: time.Date(2026, 11, 30, 8, 49, 20, 0, time.UTC)}
	rnd := grantretry.WithRandSource(mrand.NewPCG(2026, 849))

	// The application: five 503s, the retries spent.
	tr := grantretry.New(inner, grantretry.WithDeadLetter(sink), grantretry.WithClock(clk), rnd, grantretry.WithoutBreaker())
	ctx := grantretry.WithSubmissionID(context.Background(), "GRANT-2026-0042")
	app, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+portalHost+"/api/v2/applications?cycle=2026&api_key="+portalKey,
		strings.NewReader(`{"applicant":"Riverside Food Bank","amount":25000}`))
	if err != nil {
		return err
	}
	app.Header.Set("Accept", "application/json")
	app.Header.Set("Content-Type", "application/json")
	app.Header.Set("Authorization", portalToken)
	if err := send(tr, app); err != nil {
		return err
	}

	// The report: the breaker, opened by a call that kept no letter,
	// refuses it before anything is sent.
	clk.set(time.Date(2026, 11, 30, 9, 32, 3, 0, time.UTC))
	tr = grantretry.New(inner, grantretry.WithDeadLetter(sink), grantretry.WithClock(clk), rnd, grantretry.WithBreaker(1, time.Hour))
	sink.set(false)
	status, _ := http.NewRequest(http.MethodGet, "https://"+portalHost+"/api/v2/status", nil)
	if err := send(tr, status); err != nil {
		return err
	}
	sink.set(true)
	clk.set(time.Date(2026, 11, 30, 9, 32, 4, 90_000_000, time.UTC))
	report, err := http.NewRequest(http.MethodPut, "https://"+portalHost+"/api/v2/reports/R-88", strings.NewReader(`{"period":"2026-Q3","spent":1840}`))
	if err != nil {
		return err
	}
	report.Header.Set("Content-Type", "application/json")
	report.Header.Set("X-Api-Key", portalKey)
	if err := send(tr, report); err != nil {
		return err
	}
	p.mu.Lock()
	p.up = true
	p.mu.Unlock()
	return letterTranscripts(cli, work, dir, funder.env())
}

// send makes one call through tr and closes its answer.
func send(tr http.RoundTripper, req *http.Request) error {
	resp, err := tr.RoundTrip(req)
	var e *grantretry.Error
	switch {
	case errors.As(err, &e):
		return nil
	case err != nil:
		return err
	}
	resp.Body.Close()
	return nil
}

func letterTranscripts(cli, work string, dir *deadletter.Dir, env []string) error {
	letters, err := dir.List()
	if err != nil {
		return err
	}
	if len(letters) != 2 {
		return fmt.Errorf("%d letters, want 2", len(letters))
	}
	first := letters[0].ID
	section("dead-letters.md: the first letter, " + first + ".json")
	data, err := os.ReadFile(filepath.Join(work, "dead-letters", first+".json"))
	if err != nil {
		return err
	}
	fmt.Printf("%s\n", data)
	section("dead-letters.md: list")
	if err := shell(cli, work, env, "grantretry deadletter list dead-letters", false, "deadletter", "list", "dead-letters"); err != nil {
		return err
	}
	section("dead-letters.md: show")
	if err := shell(cli, work, env, "grantretry deadletter show dead-letters "+first, false, "deadletter", "show", "dead-letters", first); err != nil {
		return err
	}
	section("dead-letters.md: dry run")
	creds := []string{"-header-env", "Authorization=FUNDER_TOKEN", "-header-env", "X-Api-Key=FUNDER_API_KEY"}
	shown := ` -header-env "Authorization=FUNDER_TOKEN" -header-env "X-Api-Key=FUNDER_API_KEY"`
	if err := shell(cli, work, env, "grantretry deadletter redeliver dead-letters "+first+" -dry-run"+shown, false,
		append([]string{"deadletter", "redeliver", "dead-letters", first, "-dry-run"}, creds...)...); err != nil {
		return err
	}
	section("dead-letters.md: a key pasted where the variable's name goes")
	if err := shell(cli, work, env, `grantretry deadletter redeliver dead-letters -all -trail trail.jsonl -header-env "Authorization=FUNDER_TOKEN" -header-env "X-Api-Key=k-456-live-9f3a"`, true,
		"deadletter", "redeliver", "dead-letters", "-all", "-trail", "trail.jsonl", "-header-env", "Authorization=FUNDER_TOKEN", "-header-env", "X-Api-Key=k-456-live-9f3a"); err != nil {
		return err
	}
	section("dead-letters.md: redeliver")
	if err := shell(cli, work, env, "grantretry deadletter redeliver dead-letters -all -trail trail.jsonl"+shown, true,
		append([]string{"deadletter", "redeliver", "dead-letters", "-all", "-trail", "trail.jsonl"}, creds...)...); err != nil {
		return err
	}
	section("dead-letters.md: the redelivery record, redelivered/" + first + ".result.json")
	if data, err = os.ReadFile(filepath.Join(work, "dead-letters", deadletter.RedeliveredDir, first+".result.json")); err != nil {
		return err
	}
	fmt.Printf("%s\n", data)
	section("dead-letters.md: show, redelivered")
	if err := shell(cli, work, env, "grantretry deadletter show dead-letters "+first, false, "deadletter", "show", "dead-letters", first); err != nil {
		return err
	}
	section("dead-letters.md: the directory")
	return filepath.WalkDir(filepath.Join(work, "dead-letters"), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(work, path)
		fmt.Println(rel)
		return nil
	})
}

// tunnel is an HTTPS proxy that connects every CONNECT to addr.
func tunnel(addr string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
			return
		}
		up, err := net.Dial("tcp", addr)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			up.Close()
			return
		}
		conn.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n"))
		go func() {
			io.Copy(up, buf)
			up.Close()
		}()
		io.Copy(conn, up)
		conn.Close()
	})
}

// certificates makes a certificate authority for the run and a server
// certificate it signs for the portal's name.
func certificates() (*x509.Certificate, tls.Certificate, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "docsamples CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: portalHost}, DNSNames: []string{portalHost},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	return ca, tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// outagePortal is the runbook's funder, whose answers are set by its
// mode: "down" (503 to everything), "gateway" (504: the request may have
// been applied), "quota" (429, and not before four hours) or "up" (it
// takes an application with credentials, and refuses a report).
type outagePortal struct {
	mu   sync.Mutex
	mode string
}

func (p *outagePortal) set(mode string) {
	p.mu.Lock()
	p.mode = mode
	p.mu.Unlock()
}

func (p *outagePortal) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	p.mu.Lock()
	mode := p.mode
	p.mu.Unlock()
	switch mode {
	case "down":
		http.Error(w, "maintenance", http.StatusServiceUnavailable)
	case "gateway":
		http.Error(w, "upstream timed out", http.StatusGatewayTimeout)
	case "quota":
		w.Header().Set("Retry-After", "14400")
		http.Error(w, "daily quota reached", http.StatusTooManyRequests)
	default:
		(&portal{up: true}).ServeHTTP(w, r)
	}
}

// runbookLetter is one call of the runbook's afternoon.
type runbookLetter struct {
	at         time.Duration // after the afternoon's start
	submission string
	mode       string        // the funder's mode while the call is made
	closing    time.Duration // the submission's closing time, after the start; 0: none
	report     bool          // a report (PUT), which the funder refuses once it is up; otherwise an application (POST)
}

// runbookSamples writes the letters of the runbook in docs/dead-letters.md
// through Transports, on a clock three hours behind the system's, so that
// the command, which judges letters by the system clock, finds one late,
// one not due, one the funder refused, one ambiguous and the due ones of
// an outage; then it runs the runbook's commands against them.
func runbookSamples(cli, work string) error {
	if err := os.MkdirAll(work, 0o700); err != nil {
		return err
	}
	p := &outagePortal{mode: "down"}
	funder, err := startFunder(work, p)
	if err != nil {
		return err
	}
	defer funder.close()
	dir, err := deadletter.Open(filepath.Join(work, "dead-letters"))
	if err != nil {
		return err
	}
	start := time.Now().UTC().Truncate(time.Minute).Add(-3 * time.Hour)
	clk := &clock{now: start}
	rnd := grantretry.WithRandSource(mrand.NewPCG(2026, 1204))
	sink := &letterSink{dir: dir, on: true}
	call := func(tr http.RoundTripper, c runbookLetter) error {
		clk.set(start.Add(c.at))
		p.set(c.mode)
		ctx := grantretry.WithSubmissionID(context.Background(), c.submission)
		if c.closing != 0 {
			ctx = grantretry.WithClosingTime(ctx, start.Add(c.closing))
		}
		method, url, body := http.MethodPost, "https://"+portalHost+"/api/v2/applications",
			fmt.Sprintf(`{"submission":%q,"amount":25000}`, c.submission)
		if c.report {
			method, url, body = http.MethodPut, "https://"+portalHost+"/api/v2/reports/"+c.submission, `{"period":"2026-Q3","spent":1840}`
		}
		req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", portalToken)
		return send(tr, req)
	}
	alone := func() http.RoundTripper {
		return grantretry.New(funder.inner, grantretry.WithDeadLetter(sink), grantretry.WithClock(clk), rnd, grantretry.WithoutBreaker())
	}
	for _, c := range []runbookLetter{
		{at: 0, submission: "GRANT-2026-0063", mode: "down", closing: 20 * time.Minute},
		{at: 7 * time.Minute, submission: "GRANT-2026-0066", mode: "gateway"},
		{at: 12 * time.Minute, submission: "GRANT-2026-0058", mode: "down", report: true},
		{at: 41 * time.Minute, submission: "GRANT-2026-0051", mode: "quota"},
		{at: 64 * time.Minute, submission: "GRANT-2026-0070", mode: "down", closing: 9 * time.Hour},
	} {
		if err := call(alone(), c); err != nil {
			return err
		}
	}
	// The outage: the breaker, opened by a call that kept no letter,
	// refuses the next calls before anything is sent.
	breaker := grantretry.New(funder.inner, grantretry.WithDeadLetter(sink), grantretry.WithClock(clk), rnd,
		grantretry.WithBreaker(1, time.Hour), grantretry.WithBreakerProbe(time.Hour))
	clk.set(start.Add(65 * time.Minute))
	sink.set(false)
	status, _ := http.NewRequest(http.MethodGet, "https://"+portalHost+"/api/v2/status", nil)
	if err := send(breaker, status); err != nil {
		return err
	}
	sink.set(true)
	for i, sub := range []string{"GRANT-2026-0071", "GRANT-2026-0072", "GRANT-2026-0073", "GRANT-2026-0074"} {
		if err := call(breaker, runbookLetter{at: time.Duration(66+3*i) * time.Minute, submission: sub, mode: "down"}); err != nil {
			return err
		}
	}
	// The report was redelivered once the funder was up, an hour ago, and
	// refused: its letter's last answer is the refusal.
	letters, err := dir.List()
	if err != nil {
		return err
	}
	report := ""
	for _, l := range letters {
		if l.SubmissionID == "GRANT-2026-0058" {
			report = l.ID
		}
	}
	clk.set(start.Add(2 * time.Hour))
	p.set("up")
	client := &http.Client{Transport: withCredentials{alone()}}
	resp, err := dir.Redeliver(context.Background(), client, report, nil)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnprocessableEntity {
		return fmt.Errorf("the report's redelivery was answered %d, want 422", resp.StatusCode)
	}
	return runbookTranscripts(cli, work, dir, funder.env())
}

// withCredentials adds the portal's credentials to a clone of each
// request.
type withCredentials struct{ next http.RoundTripper }

func (t withCredentials) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", portalToken)
	r.Header.Set("X-Api-Key", portalKey)
	return t.next.RoundTrip(r)
}

func runbookTranscripts(cli, work string, dir *deadletter.Dir, env []string) error {
	letters, err := dir.List()
	if err != nil {
		return err
	}
	bySubmission := map[string]string{}
	for _, l := range letters {
		bySubmission[l.SubmissionID] = l.ID
	}
	late, refused := bySubmission["GRANT-2026-0063"], bySubmission["GRANT-2026-0058"]
	list := []string{"deadletter", "list", "dead-letters"}
	section("dead-letters.md runbook: list")
	if err := shell(cli, work, env, "grantretry deadletter list dead-letters", false, list...); err != nil {
		return err
	}
	section("dead-letters.md runbook: when a submission closes")
	if err := shellPipe(cli, work, env, `"$GRANTRETRY" deadletter show dead-letters `+bySubmission["GRANT-2026-0070"]+` | grep -E '^(due|due by|late|submission id) '`); err != nil {
		return err
	}
	creds := []string{"-header-env", "Authorization=FUNDER_TOKEN", "-header-env", "X-Api-Key=FUNDER_API_KEY"}
	shown := ` -header-env "Authorization=FUNDER_TOKEN" -header-env "X-Api-Key=FUNDER_API_KEY"`
	// A step with a pipe runs it in the shell; the others run the command.
	for _, s := range []struct {
		title, shown string
		status       bool
		args         []string
		pipe         string
	}{
		{"dry run of one submission", "grantretry deadletter redeliver dead-letters -submission GRANT-2026-0070 -dry-run" + shown, true,
			append([]string{"deadletter", "redeliver", "dead-letters", "-submission", "GRANT-2026-0070", "-dry-run"}, creds...), ""},
		{"redeliver -all at a pace", "grantretry deadletter redeliver dead-letters -all -rate 20/s -trail trail.jsonl" + shown, true,
			append([]string{"deadletter", "redeliver", "dead-letters", "-all", "-rate", "20/s", "-trail", "trail.jsonl"}, creds...), ""},
		{"retire", `grantretry deadletter retire dead-letters ` + refused + ` -reason "funder refused: 422, the report's period is closed" -by j.alvarez@ops -trail trail.jsonl`, true,
			[]string{"deadletter", "retire", "dead-letters", refused, "-reason", "funder refused: 422, the report's period is closed", "-by", "j.alvarez@ops", "-trail", "trail.jsonl"}, ""},
		{title: "show, retired", pipe: `"$GRANTRETRY" deadletter show dead-letters ` + refused + ` | grep -E '^(letter|state) '`},
		{"a late letter named", "grantretry deadletter redeliver dead-letters " + late + " -trail trail.jsonl" + shown, true,
			append([]string{"deadletter", "redeliver", "dead-letters", late, "-trail", "trail.jsonl"}, creds...), ""},
		{"a late letter the funder agreed to take", "grantretry deadletter redeliver dead-letters " + late + " -late -trail trail.jsonl" + shown, true,
			append([]string{"deadletter", "redeliver", "dead-letters", late, "-late", "-trail", "trail.jsonl"}, creds...), ""},
		{"list, after", "grantretry deadletter list dead-letters", false, list, ""},
	} {
		section("dead-letters.md runbook: " + s.title)
		var err error
		if s.pipe != "" {
			err = shellPipe(cli, work, env, s.pipe)
		} else {
			err = shell(cli, work, env, s.shown, s.status, s.args...)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
