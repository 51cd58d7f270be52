package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"slices"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/strata-hpc/strata/bridge/internal/config"
	"github.com/strata-hpc/strata/internal/secretfile"
)

// secretRule is the bridge's rule for its secrets: its own group
// (root:strata-bridge 0640, as packaged) may read them.
var secretRule = secretfile.Rule{Groups: []string{"strata-bridge"}}

// checkSecrets applies secretRule to every secret of the configuration:
// the slurmrestd token, the API token, the PostgreSQL password file and
// the kubeconfig when it holds
// credentials (with the key and token files it names). A refusal is a
// problem; a group that may read is a warning.
func checkSecrets(cfg *config.Config) (warnings, problems []string) {
	check := func(key, path string) {
		w, err := secretRule.Check(path)
		if key == "slurm.token_file" || key == "api.token_file" {
			// Read as run reads them: an empty token is refused alike.
			w, err = secretRule.Verify(path)
		}
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("%s: %v", key, err))
		case w != "":
			warnings = append(warnings, key+": "+w)
		}
	}
	check("slurm.token_file", cfg.Slurm.TokenFile)
	if f := cfg.Store.DatabasePasswordFile; cfg.Store.Postgres() && f != "" {
		// Read as run reads it: an empty password is refused alike.
		if w, err := secretRule.Verify(f); err != nil {
			problems = append(problems, fmt.Sprintf("store.database_password_file: %v", err))
		} else if w != "" {
			warnings = append(warnings, "store.database_password_file: "+w)
		}
	}
	if _, err := os.Stat(cfg.API.TokenFile); errors.Is(err, fs.ErrNotExist) {
		problems = append(problems, fmt.Sprintf("api.token_file: %s does not exist: make it with "+
			"head -c 32 /dev/urandom | base64 > %[1]s; chgrp strata-bridge %[1]s; chmod 0640 %[1]s", cfg.API.TokenFile))
	} else {
		check("api.token_file", cfg.API.TokenFile)
	}
	if kc := cfg.Kubernetes.Kubeconfig; kc != "" {
		inline, files, err := kubeconfigSecrets(kc)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			// restConfig reports it
		case err != nil:
			problems = append(problems, fmt.Sprintf("kubernetes.kubeconfig: %v", err))
		default:
			if inline {
				check("kubernetes.kubeconfig", kc)
			}
			for _, f := range files {
				check("kubernetes.kubeconfig "+kc+" names "+f+", which", f)
			}
		}
	}
	return warnings, problems
}

// kubeconfigSecrets says whether a kubeconfig holds credentials itself (a
// token, a client key, a password, an auth provider's tokens) and which
// key and token files it names.
func kubeconfigSecrets(path string) (inline bool, files []string, err error) {
	kc, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return false, nil, err
	}
	for _, a := range kc.AuthInfos {
		if a.Token != "" || len(a.ClientKeyData) > 0 || a.Password != "" || a.AuthProvider != nil {
			inline = true
		}
		for _, f := range []string{a.ClientKey, a.TokenFile} {
			if f != "" && !slices.Contains(files, f) {
				files = append(files, f)
			}
		}
	}
	return inline, files, nil
}

// listenWarning says what a listen address that other hosts reach risks:
// the API is plain HTTP.
func listenWarning(cfg *config.Config) string {
	if cfg.ListenLoopback() {
		return ""
	}
	return fmt.Sprintf("listen %s is not a loopback address and the API has no TLS: the bearer token and every answer cross the network "+
		"in clear; listen on 127.0.0.1 and put a TLS proxy in front for other hosts", cfg.Listen)
}

// apiHosts are the Host names the API answers besides loopback: the
// listen address's host (unless it is every address), this host's name,
// and api.allowed_hosts.
func apiHosts(cfg *config.Config) []string {
	var hosts []string
	if h, _, err := net.SplitHostPort(cfg.Listen); err == nil {
		if ip := net.ParseIP(h); ip == nil || !ip.IsUnspecified() {
			hosts = append(hosts, h)
		}
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		hosts = append(hosts, h)
	}
	return append(hosts, cfg.API.AllowedHosts...)
}
