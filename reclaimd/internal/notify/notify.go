// Package notify tells a job's owner what reclaimd did or will do: a JSON
// webhook, and mail through the local MTA (sendmail -t) from a text
// template. A failed notice is logged by the caller; it never stops an
// action.
package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"text/template"
	"time"

	"github.com/strata-hpc/strata/reclaimd/internal/controller"
)

// Webhook posts each notice as JSON.
type Webhook struct {
	URL    string
	Client *http.Client
}

// Notify posts n.
func (w Webhook) Notify(ctx context.Context, n controller.Notice) error {
	body, err := json.Marshal(n)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	client := w.Client
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
		return fmt.Errorf("webhook answered HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return nil
}

// Mail sends each notice as mail through sendmail -t.
type Mail struct {
	Sendmail string // default /usr/sbin/sendmail
	From     string
	Domain   string // appended to the user name: alice -> alice@Domain; empty leaves the local user
	Template *template.Template
	// Admins get the notices to admins (node drained, resumed, the drain
	// cap hit; Notice.Admin), in AdminTemplate (DefaultAdminTemplate
	// when nil). None: admin notices are not mailed.
	Admins        []string
	AdminTemplate *template.Template
}

// DefaultAdminTemplate is the mail of a notice to the admins.
const DefaultAdminTemplate = `Subject: [strata] {{.Node}}: {{.Action}}

reclaimd's GPU node health: {{.Action}} on node {{.Node}} (partition {{.Partition}}).

{{.Reason}}

GET /v1/nodes/health on reclaimd shows the node's faults and its last health check.
`

// RecoveryTemplate is the mail of recovery's notices (a failed job
// retried, held, or not retried), whatever Template is: those say what
// failed, not what was idle.
const RecoveryTemplate = `Subject: [strata] job {{.JobID}} failed ({{.FailureClass}}): {{.Action}}

{{if .Admin}}Admins,{{else}}Hello {{.User}},{{end}}

{{if .Admin}}Job {{.JobID}} of {{.User}}{{else}}Your job {{.JobID}}{{end}} (account {{.Account}}) ended with a failure of class {{.FailureClass}}.
What happened: {{.Action}}
Why: {{.Reason}}
{{if .StderrTail}}
The end of its stderr:
{{range .StderrTail}}    {{.}}
{{end}}{{end}}
The evidence, as reclaimd recorded it: {{printf "%s" .Evidence}}
`

// DefaultTemplate is used when no template file is configured; the one in
// etc/strata/reclaimd-mail.tmpl is the same text.
const DefaultTemplate = `Subject: [strata] job {{.JobID}}: {{.Action}} ({{.Rule}})

Hello {{.User}},

reclaimd judged the GPUs of your job {{.JobID}} (account {{.Account}}) idle.
{{if .DryRun}}(Dry run: nothing was done.)
{{end}}
What happened: {{.Action}}
Why: {{.Reason}}

If the job is working (loading data, waiting on a peer), make the GPUs busy or
ask your admins for an exemption; a job whose GPUs get busy again is left alone.
`

// ParseTemplate reads a mail template.
func ParseTemplate(text string) (*template.Template, error) {
	return template.New("mail").Option("missingkey=error").Parse(text)
}

// Notify sends n to its user, or a notice to admins to Admins.
func (m Mail) Notify(ctx context.Context, n controller.Notice) error {
	t, deflt, to := m.Template, DefaultTemplate, n.User
	if n.Admin {
		if len(m.Admins) == 0 {
			return nil
		}
		t, deflt, to = m.AdminTemplate, DefaultAdminTemplate, strings.Join(m.Admins, ", ")
	} else if n.User == "" {
		return errors.New("mail: the job has no user")
	} else if m.Domain != "" {
		to += "@" + m.Domain
	}
	if n.FailureClass != "" {
		// Recovery's notices say what failed, not what was idle: their
		// own text, whatever the configured templates are.
		t = nil
		deflt = RecoveryTemplate
	}
	if t == nil {
		var err error
		if t, err = ParseTemplate(deflt); err != nil {
			return err
		}
	}
	var msg bytes.Buffer
	fmt.Fprintf(&msg, "To: %s\nFrom: %s\n", to, m.From)
	if err := t.Execute(&msg, n); err != nil {
		return fmt.Errorf("mail template: %w", err)
	}
	path := m.Sendmail
	if path == "" {
		path = "/usr/sbin/sendmail"
	}
	cmd := exec.CommandContext(ctx, path, "-t")
	cmd.Stdin = &msg
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s -t: %w: %s", path, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// All sends a notice through every notifier and joins their errors.
type All []controller.Notifier

// Notify sends n through each.
func (a All) Notify(ctx context.Context, n controller.Notice) error {
	var errs []error
	for _, x := range a {
		errs = append(errs, x.Notify(ctx, n))
	}
	return errors.Join(errs...)
}
