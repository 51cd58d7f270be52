package apply

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// Scontrol is a Controller that runs scontrol on the slurmctld host.
type Scontrol struct {
	Path string   // "scontrol" when empty
	Env  []string // added to the environment (SLURM_CONF=...)
	// RestartCommand, when set, is run through sh -c to start slurmctld
	// again ("systemctl restart slurmctld").
	RestartCommand string
}

func (s Scontrol) run(ctx context.Context, args ...string) ([]byte, error) {
	path := s.Path
	if path == "" {
		path = "scontrol"
	}
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = append(cmd.Environ(), s.Env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("scontrol %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()+out.String()))
	}
	return out.Bytes(), nil
}

// Reconfigure runs scontrol reconfigure.
func (s Scontrol) Reconfigure(ctx context.Context) error {
	_, err := s.run(ctx, "reconfigure")
	return err
}

// Ping fails unless scontrol ping reports the primary controller UP.
func (s Scontrol) Ping(ctx context.Context) error {
	out, err := s.run(ctx, "ping")
	if err != nil {
		return err
	}
	if !strings.Contains(string(out), "is UP") {
		return fmt.Errorf("slurmctld is not up: %s", strings.TrimSpace(string(out)))
	}
	return nil
}

// ShowTopology runs scontrol show topology.
func (s Scontrol) ShowTopology(ctx context.Context) ([]byte, error) {
	return s.run(ctx, "show", "topology")
}

// ShowTopologyNamed runs scontrol show topology NAME (one topology of a
// topology.yaml).
func (s Scontrol) ShowTopologyNamed(ctx context.Context, name string) ([]byte, error) {
	return s.run(ctx, "show", "topology", name)
}

// Restart runs RestartCommand.
func (s Scontrol) Restart(ctx context.Context) error {
	if s.RestartCommand == "" {
		return fmt.Errorf("no restart command configured")
	}
	out, err := exec.CommandContext(ctx, "sh", "-c", s.RestartCommand).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", s.RestartCommand, err, strings.TrimSpace(string(out)))
	}
	return nil
}
