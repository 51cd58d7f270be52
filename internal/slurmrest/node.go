package slurmrest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// Node states SetNodeState sets.
const (
	NodeDrain  = "DRAIN"
	NodeResume = "RESUME"
)

// SetNodeState drains (NodeDrain) or resumes (NodeResume) a node, with
// reason as Slurm's node reason (required to drain). It is one request,
// POST /slurm/<parser>/node/<name>, whose body every supported parser
// reads alike ({"state": [...], "reason": ...}), so it goes without the
// generated clients.
func (c *Client) SetNodeState(ctx context.Context, name, state, reason string) error {
	if name == "" {
		return errors.New("set node state: no node name")
	}
	if state != NodeDrain && state != NodeResume {
		return fmt.Errorf("set node state: %q is not %s or %s", state, NodeDrain, NodeResume)
	}
	if state == NodeDrain && reason == "" {
		return errors.New("set node state: a drain needs a reason")
	}
	op := fmt.Sprintf("set node %s %s", name, state)
	body := map[string]any{"state": []string{state}}
	if reason != "" {
		body["reason"] = reason
	}
	data, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	ctx = c.ctx(ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.cfg.URL+"/slurm/"+c.info.Parser+"/node/"+url.PathEscape(name), bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if err := c.authorize(ctx, req); err != nil {
		return err
	}
	resp, err := c.cfg.HTTPClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := checkResponse(op, c.user, resp.StatusCode, answer); err != nil {
		return err
	}
	c.log.Info("node state set", "node", name, "state", state, "reason", reason)
	return nil
}
