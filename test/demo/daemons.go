package main

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// daemons are the reclaimd processes a live demo step starts (agents and
// the controller), each logging to <work>/<name>.log.
type daemons struct {
	reclaimd, work string
	// fail words a failure of the step ("live reclaim, step ...").
	fail  func(step, format string, args ...any) error
	procs []*exec.Cmd
	ended chan string
}

func newDaemons(reclaimd, work string, fail func(step, format string, args ...any) error) *daemons {
	return &daemons{reclaimd: reclaimd, work: work, fail: fail, ended: make(chan string, 16)}
}

// start runs reclaimd with args as name.
func (d *daemons) start(step, name string, args ...string) error {
	log, err := os.Create(filepath.Join(d.work, name+".log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(d.reclaimd, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return d.fail(step, "start %s: %v", name, err)
	}
	d.procs = append(d.procs, cmd)
	go func() { _ = cmd.Wait(); log.Close(); d.ended <- name }()
	return nil
}

// died fails the step when a daemon stopped, with its last lines.
func (d *daemons) died() error {
	select {
	case name := <-d.ended:
		tail, _ := os.ReadFile(filepath.Join(d.work, name+".log"))
		lines := strings.Split(strings.TrimSpace(string(tail)), "\n")
		if len(lines) > 5 {
			lines = lines[len(lines)-5:]
		}
		return d.fail("reclaimd: agents and controller", "%s stopped:\n%s", name, strings.Join(lines, "\n"))
	default:
		return nil
	}
}

// stop interrupts every daemon and waits up to 10 s for each.
func (d *daemons) stop() {
	for _, p := range d.procs {
		_ = p.Process.Signal(os.Interrupt)
	}
	for range d.procs {
		select {
		case <-d.ended:
		case <-time.After(10 * time.Second):
		}
	}
}

// The demo's agents share this secret with the controller.
const demoAgentSecret = "demo agent secret, not for production\n"

// demoAPIToken is the bearer token of the demo controller's read API
// (api.token_file): every /v1 request carries it.
const demoAPIToken = "demo-reclaimd-api-token-not-for-production"

// apiRequest is a GET of the demo controller's read API, with its token.
func apiRequest(ctx context.Context, url string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+demoAPIToken)
	return req, nil
}
