package main

import (
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/strata-hpc/strata/internal/secretfile"
	"github.com/strata-hpc/strata/portal-api/internal/bridgeclient"
	"github.com/strata-hpc/strata/portal-api/internal/config"
)

// bridgeTimeout bounds one request to a bridge: under the portal's own
// write timeout (a minute), so a deploy that waits for a long rollout
// still gets its answer to the caller; the bridge records the rollout's
// outcome either way, and GET /v1/deployments shows it.
const bridgeTimeout = 55 * time.Second

// secretRule is the rule of the portal's secret files (the bridge's
// token, the sessions' cookie key): the portal's own group may read them,
// as packaged (root:strata-portal-api 0640).
var secretRule = secretfile.Rule{Groups: []string{"strata-portal-api"}}

// bridge is a cluster's bridge client with its token file.
type bridge struct {
	token *secretfile.File
	c     *bridgeclient.Client
}

func (b *bridge) client() *bridgeclient.Client {
	if b == nil {
		return nil
	}
	return b.c
}

// bridgeClient makes the client of a cluster's bridge, nil without one.
// The token file is held to the rule of every secret at start (refused
// when others may read it), and again at each read: it is read again when
// it changes and on SIGHUP, so it can be rotated.
func bridgeClient(log *slog.Logger, cl config.Cluster) (*bridge, error) {
	if cl.BridgeURL == "" {
		return nil, nil
	}
	f := &secretfile.File{Path: cl.BridgeTokenFile, What: "bridge_token_file", Rule: secretRule, Log: log}
	if _, err := f.Get(); err != nil {
		return nil, fmt.Errorf("bridge_token_file: %w", err)
	}
	return &bridge{token: f, c: bridgeclient.New(bridgeclient.Config{URL: cl.BridgeURL, Token: f.Get,
		HTTP: &http.Client{Timeout: bridgeTimeout}})}, nil
}

// checkSecret holds one of the config's secret files (key, path; none
// when path is "") to secretRule, with the messages of serve's reads (an
// empty file refused too), for check-config.
func checkSecret(key, path string) (warning string, err error) {
	if path == "" {
		return "", nil
	}
	warning, err = secretRule.Verify(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", key, err)
	}
	return warning, nil
}
