// Package bridgeapi is the contract of strata-bridge's JSON API (version
// v1, the /v1/ of its routes): the requests it takes and the answers it
// serves, one Go type for the bridge and for the portal API that calls it.
// The bridge's store and API use these types for what they serve, so
// nothing the portal decodes is a hand copy.
//
// The JSON is what the bridge served before the types moved here, byte
// for byte (the bridge's tests hold its answers to these types). Fields
// are only ever added, and readers decode leniently, since the bridge and
// the portal are upgraded apart; a change of meaning is a new version.
package bridgeapi

import (
	"encoding/json"
	"time"
)

// APIVersion is the API version these types describe: the prefix of every
// route ("/v1/...").
const APIVersion = "v1"

// Deployment is a model served under one name.
type Deployment struct {
	Name      string    `json:"name"`
	Namespace string    `json:"namespace"`
	Tenant    string    `json:"tenant"`
	Project   string    `json:"project,omitempty"`
	State     string    `json:"state"`
	Current   int64     `json:"current_job,omitempty"` // job id of the version in force; 0 when none
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Version is one deploy of a deployment, keyed by the Slurm job that
// produced the model.
type Version struct {
	JobID     int64  `json:"job_id"`
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	Tenant    string `json:"tenant"`
	Project   string `json:"project,omitempty"`
	Account   string `json:"account"`
	User      string `json:"user"`
	// GPUs per replica (of Tier's resource) and the most replicas it can
	// run: what the tenant's serving quota counts.
	GPUs int `json:"gpus"`
	// Tier is the GPU sharing tier of the GPUs (servingquota's names;
	// "" is read as dedicated).
	Tier        string          `json:"tier,omitempty"`
	MaxReplicas int             `json:"max_replicas"`
	ModelPath   string          `json:"model"`
	Spec        json.RawMessage `json:"spec"`
	Objects     json.RawMessage `json:"objects,omitempty"` // the rendered objects, in apply order
	Outcome     string          `json:"outcome"`
	Message     string          `json:"message,omitempty"`
	CreatedAt   time.Time       `json:"created_at"`
	FinishedAt  *time.Time      `json:"finished_at,omitempty"`
}

// Event is one action on a deployment.
type Event struct {
	ID      int64     `json:"id"`
	Name    string    `json:"name"`
	JobID   int64     `json:"job_id,omitempty"`
	Action  string    `json:"action"` // deploy, rollback, delete
	Outcome string    `json:"outcome"`
	Message string    `json:"message,omitempty"`
	At      time.Time `json:"at"`
}

// VersionDetail is a stored version with its label ("job-122"); its
// rendered objects only when asked for (?objects=true).
type VersionDetail struct {
	Label string `json:"version"`
	*Version
}

// DeploymentSummary is a deployment in GET /v1/deployments, with its
// current version (Current; nil when none is in force).
type DeploymentSummary struct {
	Deployment
	Version string         `json:"version,omitempty"`
	Current *VersionDetail `json:"current,omitempty"`
}

// JobID is the job whose model the deployment serves now; 0: none.
func (d DeploymentSummary) JobID() int64 { return d.Deployment.Current }

// DeploymentList is the answer of GET /v1/deployments.
type DeploymentList struct {
	Deployments []DeploymentSummary `json:"deployments"`
}

// DeploymentDetail is the answer of GET /v1/deployments/{name}.
type DeploymentDetail struct {
	Deployment
	Version  string          `json:"version,omitempty"`
	Versions []VersionDetail `json:"versions"`
	Events   []Event         `json:"events"`
}

// DeployRequest is the body of POST /v1/deploy.
type DeployRequest struct {
	Job int64 `json:"job"`
	// Name serves a job that did not ask to be served (no marker) under
	// this name, as --comment=strata:serve=<name> would.
	Name   string `json:"name,omitempty"`
	DryRun bool   `json:"dry_run,omitempty"`
}

// RollbackRequest is the body of POST /v1/deployments/{name}/rollback.
type RollbackRequest struct {
	To     string `json:"to,omitempty"` // "job-122" or "122"; empty: the previous ready version
	DryRun bool   `json:"dry_run,omitempty"`
}

// Error is the body of every error answer; a refusal (422) adds the
// check that failed, the reason and the fix.
type Error struct {
	Error  string `json:"error"`
	Check  string `json:"check,omitempty"`
	Reason string `json:"reason,omitempty"`
	Fix    string `json:"fix,omitempty"`
}

// ObjectRef names one Kubernetes object.
type ObjectRef struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
}

// String is "Kind/namespace/name" ("Kind/name" without a namespace).
func (r ObjectRef) String() string {
	if r.Namespace == "" {
		return r.Kind + "/" + r.Name
	}
	return r.Kind + "/" + r.Namespace + "/" + r.Name
}

// Applied is what a deploy or rollback did to one object.
type Applied struct {
	ObjectRef
	Action           string `json:"action"`
	GenerationBefore int64  `json:"generation_before,omitempty"`
	GenerationAfter  int64  `json:"generation_after,omitempty"`
}

// Result is the answer of a deploy or a rollback.
type Result struct {
	Action    string      `json:"action"` // deploy or rollback
	Name      string      `json:"name"`
	Namespace string      `json:"namespace"`
	Tenant    string      `json:"tenant"`
	Project   string      `json:"project,omitempty"`
	JobID     int64       `json:"job_id"`
	Version   string      `json:"version"`
	DryRun    bool        `json:"dry_run,omitempty"`
	Changed   bool        `json:"changed"`
	Outcome   string      `json:"outcome"` // ready, timeout, failed, dry-run
	Message   string      `json:"message"`
	Objects   []Applied   `json:"objects"`
	Pruned    []ObjectRef `json:"pruned,omitempty"`
	// Rollout says, before the rollout starts, how the new version
	// replaces the old: with a surge replica, or one replica at a time
	// because the tenant's quota has no room for one.
	Rollout string `json:"rollout,omitempty"`
}

// DeleteResult is the answer of a delete.
type DeleteResult struct {
	Name      string      `json:"name"`
	Namespace string      `json:"namespace"`
	DryRun    bool        `json:"dry_run,omitempty"`
	Deleted   []ObjectRef `json:"deleted"`
}
