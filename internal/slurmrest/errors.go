package slurmrest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Errors a caller can test with errors.Is.
var (
	ErrNotFound        = errors.New("not found")
	ErrExists          = errors.New("already exists")
	ErrPermission      = errors.New("permission denied")
	ErrJobPending      = errors.New("job is pending")
	ErrRequeueDisabled = errors.New("job is not requeueable")
	ErrUnsupported     = errors.New("not supported by this Slurm")
	// ErrJobsActive: slurmdbd refuses to remove an association (or an
	// account, or a user) that has running or pending jobs.
	ErrJobsActive = errors.New("jobs active")
	// ErrRefused: slurmctld refused an action for a job although
	// slurmrestd answered it as a success (see RefusedError).
	ErrRefused = errors.New("refused by Slurm")
	// ErrAlreadyDone: the job or step had already ended (or was ending)
	// when the action reached it.
	ErrAlreadyDone = errors.New("job already done")
	// ErrAnswerTooLarge: an answer of slurmrestd was larger than the
	// client's cap (see AnswerTooLargeError).
	ErrAnswerTooLarge = errors.New("answer too large")
)

// Slurm error numbers that callers decide on (slurm_errno.h).
const (
	errnoAuth       = 1007 // SLURM_PROTOCOL_AUTHENTICATION_ERROR
	errnoPermission = 2002 // ESLURM_ACCESS_DENIED
	// ESLURM_USER_ID_MISSING: what slurmctld answers a job update by a
	// user who may not change the job ("Invalid user id").
	errnoUserIDMissing   = 2010
	errnoInvalidJobID    = 2017 // ESLURM_INVALID_JOB_ID
	errnoJobPending      = 2024 // ESLURM_JOB_PENDING
	errnoDisabled        = 2037 // ESLURM_DISABLED
	errnoTransitionState = 2016 // ESLURM_TRANSITION_STATE_NO_UPDATE
	errnoAlreadyDone     = 2021 // ESLURM_ALREADY_DONE
	errnoJobsActive      = 7001 // ESLURM_JOBS_RUNNING_ON_ASSOC
)

// ErrorEntry is one entry of slurmrestd's "errors" list.
type ErrorEntry struct {
	Description string `json:"description"`
	Number      int    `json:"error_number"`
	Error       string `json:"error"`
	Source      string `json:"source"`
}

func (e ErrorEntry) String() string {
	var b strings.Builder
	if e.Description != "" {
		b.WriteString(e.Description)
	}
	if e.Error != "" && e.Error != e.Description {
		if b.Len() > 0 {
			b.WriteString(": ")
		}
		b.WriteString(e.Error)
	}
	if e.Number != 0 {
		fmt.Fprintf(&b, " (slurm error %d)", e.Number)
	}
	return b.String()
}

// APIError is a request that slurmrestd, slurmctld or slurmdbd refused.
type APIError struct {
	Op     string // what the client tried, e.g. "requeue job 42"
	Status int    // HTTP status
	Errors []ErrorEntry
}

func (e *APIError) Error() string {
	msgs := make([]string, 0, len(e.Errors))
	for _, x := range e.Errors {
		msgs = append(msgs, x.String())
	}
	detail := strings.Join(msgs, "; ")
	if detail == "" {
		detail = http.StatusText(e.Status)
	}
	return fmt.Sprintf("%s: slurmrestd answered HTTP %d: %s", e.Op, e.Status, detail)
}

// Is maps Slurm's error numbers and HTTP statuses to the sentinel errors.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.Status == http.StatusNotFound || e.has(errnoInvalidJobID)
	case ErrPermission:
		return e.has(errnoPermission) || e.has(errnoUserIDMissing)
	case ErrJobPending:
		return e.has(errnoJobPending)
	case ErrRequeueDisabled:
		return e.has(errnoDisabled)
	case ErrJobsActive:
		return e.has(errnoJobsActive)
	case ErrAlreadyDone:
		return e.has(errnoAlreadyDone)
	}
	return false
}

func (e *APIError) has(n int) bool {
	for _, x := range e.Errors {
		if x.Number == n {
			return true
		}
	}
	return false
}

// AuthError means slurmrestd did not accept the token. slurmrestd reports
// that as HTTP 401 (no token), 511 or 500 (bad or expired token, depending on
// the release), or as a ping that answers 200 with responding=false.
type AuthError struct {
	Op     string
	User   string
	Status int
	Detail string
}

func (e *AuthError) Error() string {
	return fmt.Sprintf("%s: slurmrestd rejected the token for user %q (HTTP %d: %s): "+
		"the token is missing, invalid or expired; mint a new one with "+
		"`scontrol token username=%s lifespan=SECONDS` into the token file, or check that the "+
		"jwt_hs256.key this client signs with is the cluster's", e.Op, e.User, e.Status, e.Detail, e.User)
}

// responseBody is the part of every slurmrestd answer that reports problems.
type responseBody struct {
	Errors   []ErrorEntry `json:"errors"`
	Warnings []struct {
		Description string `json:"description"`
		Source      string `json:"source"`
	} `json:"warnings"`
}

// checkResponse turns a non-success answer into an error. It is the one
// place that interprets HTTP statuses and error bodies.
func checkResponse(op, user string, status int, body []byte) error {
	var rb responseBody
	_ = json.Unmarshal(body, &rb) // a body that is not JSON still has a status
	return checkBody(op, user, status, rb)
}

// checkBody is checkResponse of a body whose errors are already read.
func checkBody(op, user string, status int, rb responseBody) error {
	if status == http.StatusNotModified {
		return nil
	}
	auth := status == http.StatusUnauthorized || status == http.StatusNetworkAuthenticationRequired
	for _, e := range rb.Errors {
		if e.Number == errnoAuth || strings.Contains(strings.ToLower(e.Description+" "+e.Error), "authentication") {
			auth = true
		}
	}
	if auth {
		detail := http.StatusText(status)
		if len(rb.Errors) > 0 {
			detail = rb.Errors[0].String()
		}
		return &AuthError{Op: op, User: user, Status: status, Detail: detail}
	}
	if status >= 200 && status < 300 && len(rb.Errors) == 0 {
		return nil
	}
	return &APIError{Op: op, Status: status, Errors: rb.Errors}
}

// warnings returns the warnings of an answer as text.
func warnings(body []byte) []string {
	var rb responseBody
	if json.Unmarshal(body, &rb) != nil {
		return nil
	}
	out := make([]string, 0, len(rb.Warnings))
	for _, w := range rb.Warnings {
		out = append(out, w.Description)
	}
	return out
}

// ItemError is slurmctld's answer for one job (or step) of an action:
// what the "status" list of DELETE /job/{id} and GET /job/{id}/requeue,
// and the "results" list of POST /job/{id}, hold for each job the action
// reached.
type ItemError struct {
	Job   string // the job or step, as slurmrestd names it ("42", "42_7", "42.batch")
	Code  int    // Slurm's error number; 0 is success
	Error string // Slurm's text of the error ("Access/permission denied")
	Why   string // a further message, when slurmctld gave one
}

// failed is whether the item reports an error.
func (e ItemError) failed() bool {
	return e.Code != 0 || (e.Error != "" && !strings.EqualFold(e.Error, "No error"))
}

func (e ItemError) String() string {
	var b strings.Builder
	if e.Job != "" {
		b.WriteString("job " + e.Job + ": ")
	}
	text := e.Error
	if text == "" {
		text = "error"
	}
	b.WriteString(text)
	if e.Why != "" && e.Why != e.Error {
		b.WriteString(" (" + e.Why + ")")
	}
	if e.Code != 0 {
		fmt.Fprintf(&b, " (slurm error %d)", e.Code)
	}
	return b.String()
}

// RefusedError is an action that slurmrestd answered with HTTP 200 and no
// entry in "errors" while slurmctld refused it for one or more of the
// jobs it names: slurmrestd reports a refused cancel, signal, requeue or
// update only in the per-job status of its answer. errors.Is matches
// ErrRefused always, and ErrPermission, ErrNotFound, ErrJobPending,
// ErrRequeueDisabled or ErrAlreadyDone by the items' error numbers.
type RefusedError struct {
	Op    string // what the client tried, e.g. "cancel job 42"
	Items []ItemError
}

func (e *RefusedError) Error() string {
	msgs := make([]string, 0, len(e.Items))
	for _, x := range e.Items {
		msgs = append(msgs, x.String())
	}
	return fmt.Sprintf("%s: Slurm refused it: %s", e.Op, strings.Join(msgs, "; "))
}

// Reason is the refusal as Slurm worded it, without the operation: the
// text of the first item (and how many more there are).
func (e *RefusedError) Reason() string {
	if len(e.Items) == 0 {
		return ""
	}
	r := e.Items[0].Error
	if r == "" {
		r = e.Items[0].String()
	}
	if n := len(e.Items) - 1; n > 0 {
		r += fmt.Sprintf(" (and %d more)", n)
	}
	return r
}

// Is maps the items' error numbers to the sentinel errors.
func (e *RefusedError) Is(target error) bool {
	want := map[error]int{ErrPermission: errnoPermission, ErrNotFound: errnoInvalidJobID, ErrJobPending: errnoJobPending,
		ErrRequeueDisabled: errnoDisabled, ErrAlreadyDone: errnoAlreadyDone}
	if target == ErrRefused {
		return true
	}
	n, ok := want[target]
	if !ok {
		return false
	}
	for _, x := range e.Items {
		if x.Code == n || (target == ErrPermission && x.Code == errnoUserIDMissing) {
			return true
		}
	}
	return false
}

// refused returns a *RefusedError of the items that report an error, or
// nil when none does.
func refused(op string, items []ItemError) error {
	var bad []ItemError
	for _, x := range items {
		if x.failed() {
			bad = append(bad, x)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return &RefusedError{Op: op, Items: bad}
}
