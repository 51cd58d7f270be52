package notify

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/strata-hpc/strata/reclaimd/internal/controller"
)

var notice = controller.Notice{JobID: 42, User: "alice", Account: "acme-llm", Tenant: "acme", Action: "warn", Rule: "train",
	Reason: "8 of 8 GPUs idle for 30m0s", At: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}

func TestWebhook(t *testing.T) {
	var got controller.Notice
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("content type %q", r.Header.Get("Content-Type"))
		}
		if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
			t.Error(err)
		}
	}))
	defer srv.Close()
	if err := (Webhook{URL: srv.URL}).Notify(context.Background(), notice); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, notice) {
		t.Errorf("webhook got %+v, want %+v", got, notice)
	}
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "nope", http.StatusTeapot) }))
	defer bad.Close()
	if err := (Webhook{URL: bad.URL}).Notify(context.Background(), notice); err == nil || !strings.Contains(err.Error(), "HTTP 418: nope") {
		t.Errorf("err = %v", err)
	}
}

// TestMail runs a stand-in sendmail (the exec edge) that saves the message.
func TestMail(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "message")
	sm := filepath.Join(dir, "sendmail")
	if err := os.WriteFile(sm, []byte("#!/bin/sh\n[ \"$1\" = -t ] || exit 3\ncat > "+out+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := (Mail{Sendmail: sm, From: "reclaimd", Domain: "example.org"}).Notify(context.Background(), notice); err != nil {
		t.Fatal(err)
	}
	msg, _ := os.ReadFile(out)
	for _, want := range []string{"To: alice@example.org\n", "From: reclaimd\n", "Subject: [strata] job 42: warn (train)\n",
		"Why: 8 of 8 GPUs idle for 30m0s"} {
		if !strings.Contains(string(msg), want) {
			t.Errorf("message lacks %q:\n%s", want, msg)
		}
	}
	if err := (Mail{Sendmail: filepath.Join(dir, "missing")}).Notify(context.Background(), notice); err == nil {
		t.Errorf("a missing sendmail was not an error")
	}
	noUser := notice
	noUser.User = ""
	if err := (Mail{Sendmail: sm}).Notify(context.Background(), noUser); err == nil {
		t.Errorf("a notice without a user was sent")
	}
}

// A notice to admins goes to the admins' addresses, in the admin
// template, and nowhere when none are given.
func TestMailAdmins(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "message")
	sm := filepath.Join(dir, "sendmail")
	if err := os.WriteFile(sm, []byte("#!/bin/sh\ncat > "+out+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	n := controller.Notice{Admin: true, Action: controller.NoticeDrained, Node: "gpu3", Partition: "gpu",
		Reason: "strata: Xid 79 on GPU 3 (GPU fell off the bus)"}
	if err := (Mail{Sendmail: sm, From: "reclaimd", Domain: "example.org"}).Notify(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("an admin notice was mailed with no admins: %v", err)
	}
	if err := (Mail{Sendmail: sm, From: "reclaimd", Domain: "example.org", Admins: []string{"ops@example.org", "hpc@example.org"}}).Notify(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	msg, _ := os.ReadFile(out)
	for _, want := range []string{"To: ops@example.org, hpc@example.org\n", "Subject: [strata] gpu3: node-drained\n",
		"strata: Xid 79 on GPU 3 (GPU fell off the bus)"} {
		if !strings.Contains(string(msg), want) {
			t.Errorf("message lacks %q:\n%s", want, msg)
		}
	}
}

// TestMailRecovery: a recovery notice is mailed with the recovery text
// and the stderr tail, an admins' notice to the admins' address alone.
func TestMailRecovery(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "message")
	sm := filepath.Join(dir, "sendmail")
	if err := os.WriteFile(sm, []byte("#!/bin/sh\ncat >> "+out+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	custom, err := ParseTemplate("Subject: idle only\n\n{{.Reason}}\n")
	if err != nil {
		t.Fatal(err)
	}
	n := controller.Notice{JobID: 7, User: "alice", Account: "llm", Action: "retry", Rule: "train", Reason: "retry 1/1 after nccl on gpu1",
		FailureClass: "nccl", Evidence: []byte(`{"state":"FAILED"}`), StderrTail: []string{"NCCL error in: x"}}
	m := Mail{Sendmail: sm, From: "reclaimd", Template: custom}
	if err := m.Notify(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	admins := n
	admins.Admin = true
	if err := m.Notify(context.Background(), admins); err != nil {
		t.Fatal(err)
	}
	m.Admins = []string{"hpc-admins@example.org"}
	if err := m.Notify(context.Background(), admins); err != nil {
		t.Fatal(err)
	}
	msg, _ := os.ReadFile(out)
	for _, want := range []string{"To: alice\n", "Subject: [strata] job 7 failed (nccl): retry\n", "    NCCL error in: x\n",
		`{"state":"FAILED"}`, "To: hpc-admins@example.org\n", "Job 7 of alice"} {
		if !strings.Contains(string(msg), want) {
			t.Errorf("messages lack %q:\n%s", want, msg)
		}
	}
	if c := strings.Count(string(msg), "To: "); c != 2 {
		t.Errorf("%d messages, want 2 (no admins' address: none for them)", c)
	}
}
