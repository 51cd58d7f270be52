package core

import (
	"testing"
	"time"

	"github.com/strata-hpc/strata/portal-api/internal/session"
)

func TestParseActivity(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for name, tc := range map[string]struct {
		kind session.Kind
		body string
		want time.Time
		ok   bool
	}{
		"jupyterlab":      {session.JupyterLab, `{"connections":0,"kernels":1,"last_activity":"2026-12-01T10:00:00.000000Z","started":"2026-12-01T09:00:00Z"}`, at, true},
		"with an offset":  {session.JupyterLab, `{"last_activity":"2026-12-01T11:00:00+01:00"}`, at, true},
		"none":            {session.JupyterLab, `{"kernels":0}`, time.Time{}, false},
		"not json":        {session.JupyterLab, `<html>`, time.Time{}, false},
		"code-server":     {session.CodeServer, `{"status":"alive","lastHeartbeat":1795600800000}`, time.UnixMilli(1795600800000).UTC(), true},
		"code-server new": {session.CodeServer, `{"status":"expired","lastHeartbeat":0}`, time.Time{}, false},
		"ttyd":            {session.TTYD, `{}`, time.Time{}, false},
	} {
		t.Run(name, func(t *testing.T) {
			got, ok := parseActivity(tc.kind, []byte(tc.body))
			if ok != tc.ok || !got.Equal(tc.want) {
				t.Errorf("= %v %v, want %v %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// FuzzParseActivity: any answer of a server is read without a panic, and
// a time it gives is in UTC.
func FuzzParseActivity(f *testing.F) {
	f.Add(`{"last_activity":"2026-12-01T10:00:00Z"}`, false)
	f.Add(`{"lastHeartbeat":1795600800000}`, true)
	f.Fuzz(func(t *testing.T, body string, code bool) {
		kind := session.JupyterLab
		if code {
			kind = session.CodeServer
		}
		if got, ok := parseActivity(kind, []byte(body)); ok && got.Location() != time.UTC {
			t.Fatalf("%v is not UTC", got)
		}
	})
}

func TestKernelBusy(t *testing.T) {
	for body, want := range map[string]bool{
		`[{"id":"k1","execution_state":"idle"},{"id":"k2","execution_state":"busy"}]`: true,
		`[{"id":"k1","execution_state":"idle"}]`:                                      false,
		`[]`:                                                                          false,
		`{"execution_state":"busy"}`:                                                  false,
		`<html>`:                                                                      false,
		`[{"id":"k1","execution_state":"starting"}]`:                                  false,
	} {
		if got := kernelBusy([]byte(body)); got != want {
			t.Errorf("%s: %v, want %v", body, got, want)
		}
	}
}
