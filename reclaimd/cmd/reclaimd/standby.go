package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"

	"github.com/strata-hpc/strata/internal/lease"
	"github.com/strata-hpc/strata/reclaimd/internal/config"
	"github.com/strata-hpc/strata/reclaimd/internal/store"
)

// LeaseName is the controller lease's row: one database per cluster, so
// one name.
const LeaseName = "reclaimd"

// newLease is this process's claim to act for the cluster whose database
// st is: it lasts three quarters of standby.takeover_within, and a
// standby tries every quarter.
func newLease(st *store.Store, cfg config.Config, log *slog.Logger) *lease.Lease {
	return &lease.Lease{DB: st.DB(), Name: LeaseName, Holder: holderName(), TTL: cfg.Standby.LeaseTTL(), Log: log}
}

// holderName names this process in the lease: its host and pid, to read,
// and a random part, so that a restarted process with the pid of the one
// before is another holder (and takes a new generation).
func holderName() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}
