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
)

// Slurm error numbers that callers decide on (slurm_errno.h).
const (
	errnoAuth            = 1007 // SLURM_PROTOCOL_AUTHENTICATION_ERROR
	errnoPermission      = 2002 // ESLURM_ACCESS_DENIED
	errnoInvalidJobID    = 2017 // ESLURM_INVALID_JOB_ID
	errnoJobPending      = 2024 // ESLURM_JOB_PENDING
	errnoDisabled        = 2037 // ESLURM_DISABLED
	errnoTransitionState = 2016 // ESLURM_TRANSITION_STATE_NO_UPDATE
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
		return e.has(errnoPermission)
	case ErrJobPending:
		return e.has(errnoJobPending)
	case ErrRequeueDisabled:
		return e.has(errnoDisabled)
	case ErrJobsActive:
		return e.has(errnoJobsActive)
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
