// Package reclaimapi is the contract of reclaimd's JSON API (version v1,
// the /v1/ of its routes): the answers reclaimd serves and the portal API
// reads, one Go type for both sides. reclaimd's store and controller use
// these types for what they serve, so an answer cannot drift from what
// its readers decode.
//
// The JSON is what reclaimd served before the types moved here, byte for
// byte: reclaimd's controller tests replay and compare real answers
// (reclaimd/internal/controller/testdata/api), and the portal's tests
// serve those same files. Fields are only ever added (a reader built
// before a field ignores it); a change of meaning is a new version.
//
// A decision's evidence is kept by reclaimd as the JSON of its decision
// core; Evidence is its typed reading, with the field names that JSON has
// always had (Go's, no tags), held to reclaimd's own type by a test there.
package reclaimapi

import (
	"encoding/json"
	"time"
)

// APIVersion is the API version these types describe: the prefix of every
// route ("/v1/...").
const APIVersion = "v1"

// The routes, with their answers.
const (
	// PathJobReclaim answers JobReclaim; 404 when reclaimd never judged
	// the job.
	PathJobReclaim = "/v1/jobs/{id}/reclaim"
	// PathDecisions answers Decisions (?since=RFC3339|unix&limit=N).
	PathDecisions = "/v1/decisions"
	// PathJobAttempts answers Attempts; 404 when reclaimd saw no failed
	// run of the job.
	PathJobAttempts = "/v1/jobs/{id}/attempts"
	// PathFailures answers Failures (?since=RFC3339|unix&limit=N).
	PathFailures = "/v1/failures"
	// PathNodesHealth answers NodesHealth (?node=NAME); 404 when node
	// health is off.
	PathNodesHealth = "/v1/nodes/health"
	// PathWorth answers Worth (?since=RFC3339|unix&limit=N): the
	// reclaims carried out since then, each with its bound and what was
	// observed of it.
	PathWorth = "/v1/worth"
)

// GPU is one GPU of a job at decision time.
type GPU struct {
	Node  string `json:"node"`
	Index int    `json:"index"`
}

// Record is one decision about one job (or, with JobID 0, one node).
type Record struct {
	ID      int64  `json:"id"`
	JobID   int64  `json:"job_id"`
	Tenant  string `json:"tenant,omitempty"`
	Account string `json:"account,omitempty"`
	User    string `json:"user,omitempty"`
	// Node is the node a drain or resume acts on (JobID 0); "" for
	// the reclaim actions on jobs.
	Node   string `json:"node,omitempty"`
	Kind   string `json:"action"`
	Rule   string `json:"rule,omitempty"`
	Reason string `json:"reason"`
	// Evidence is the decision's evidence (ParseEvidence reads it).
	Evidence  json.RawMessage `json:"evidence,omitempty"`
	GPUs      []GPU           `json:"gpus,omitempty"`
	Status    string          `json:"outcome"`
	Error     string          `json:"error,omitempty"`
	DecidedAt time.Time       `json:"decided_at"`
	DoneAt    *time.Time      `json:"done_at,omitempty"`
}

// Reclaims reports whether the record is a reclaim carried out: an idle
// job requeued or cancelled.
func (r *Record) Reclaims() bool {
	return r.JobID > 0 && r.Status == "done" && (r.Kind == "requeue" || r.Kind == "requeue-hold" || r.Kind == "cancel")
}

// GPUKey names one GPU in Evidence.
type GPUKey struct {
	Node  string `json:"Node"`
	Index int    `json:"Index"`
}

// GPUEvidence is what one GPU showed over a decision's window.
type GPUEvidence struct {
	GPU                   GPUKey    `json:"GPU"`
	Samples               int       `json:"Samples"`
	Coverage              float64   `json:"Coverage"`
	Newest                time.Time `json:"Newest"`
	MaxUtilPercent        float64   `json:"MaxUtilPercent"`
	MaxMemActivityPercent float64   `json:"MaxMemActivityPercent"`
	MaxMemUsedMiB         float64   `json:"MaxMemUsedMiB"`
	Idle                  bool      `json:"Idle"`
}

// Evidence is what a reclaim decision was made on.
type Evidence struct {
	WindowStart time.Time `json:"WindowStart"`
	WindowEnd   time.Time `json:"WindowEnd"`
	JobStart    time.Time `json:"JobStart"`
	// JobEnd is when the job's time limit would have ended the run (zero:
	// no limit): what a reclaim frees is its GPUs until then at the most.
	JobEnd    time.Time     `json:"JobEnd,omitzero"`
	GPUs      []GPUEvidence `json:"GPUs"`
	IdleGPUs  int           `json:"IdleGPUs"`
	TotalGPUs int           `json:"TotalGPUs"`
}

// ParseEvidence reads a record's evidence; a record without any gives
// the zero Evidence.
func (r *Record) ParseEvidence() (Evidence, error) {
	var e Evidence
	if len(r.Evidence) == 0 || string(r.Evidence) == "null" {
		return e, nil
	}
	err := json.Unmarshal(r.Evidence, &e)
	return e, err
}

// JobReclaim is the answer of GET /v1/jobs/{id}/reclaim: where the job
// stands in reclaimd's state machine and every decision about it. State
// and Skipped are reclaimd's own records, shown as they are.
type JobReclaim struct {
	JobID   int64           `json:"job_id"`
	State   json.RawMessage `json:"state,omitempty"`
	Skipped json.RawMessage `json:"skipped,omitempty"`
	// Upcoming is the next step reclaimd takes if the job's GPUs stay
	// idle from the last cycle on; nil when none would come.
	Upcoming *Upcoming `json:"upcoming,omitempty"`
	Records  []Record  `json:"decisions"`
}

// Upcoming is the next step of a job's reclaim ladder if its GPUs stay
// idle: Action is warn or notify before a warning, then the step the
// warning announced (signal, requeue, requeue-hold, cancel); At is the
// earliest cycle that takes it.
type Upcoming struct {
	Action string    `json:"action"`
	At     time.Time `json:"at"`
}

// Decisions is the answer of GET /v1/decisions: oldest first.
type Decisions struct {
	Decisions []Record `json:"decisions"`
}

// Failure is one classified ended run of a job.
type Failure struct {
	ID      int64     `json:"id"`
	JobID   int64     `json:"job_id"`
	Start   time.Time `json:"run_start"`
	Tenant  string    `json:"tenant,omitempty"`
	Account string    `json:"account,omitempty"`
	User    string    `json:"user,omitempty"`
	Class   string    `json:"class"`
	// Evidence and Decision are reclaimd's failure classifier's JSON.
	Evidence json.RawMessage `json:"evidence"`
	Decision json.RawMessage `json:"decision"`
	Action   string          `json:"action"`
	Reason   string          `json:"reason"`
	// RecordID is the retry's or hold's record (its intent and outcome).
	RecordID *int64 `json:"record_id,omitempty"`
	// FailedAt is when the run ended (or was seen requeued).
	FailedAt     time.Time  `json:"failed_at"`
	ClassifiedAt time.Time  `json:"classified_at"`
	RunningAgain *time.Time `json:"running_again_at,omitempty"`
}

// Attempt is one classified failure of a job with what came of it.
type Attempt struct {
	Failure
	// Record is the retry's or hold's record: intent, outcome, error.
	Record *Record `json:"record,omitempty"`
}

// Attempts is the answer of GET /v1/jobs/{id}/attempts. Each attempt
// carries the job's account, tenant and user as reclaimd recorded them,
// so that a reader can tell whose the job was after Slurm forgot it.
type Attempts struct {
	Attempts []Attempt `json:"attempts"`
	JobID    int64     `json:"job_id"`
}

// Failures is the answer of GET /v1/failures: oldest first.
type Failures struct {
	Failures []Failure `json:"failures"`
}

// Fault is one GPU fault event an agent reported, as kept.
type Fault struct {
	ID         int64     `json:"id"`
	Node       string    `json:"node"`
	GPU        int       `json:"gpu"`
	UUID       string    `json:"uuid,omitempty"`
	Kind       string    `json:"kind"`
	Code       int       `json:"code"`
	At         time.Time `json:"at"`
	ReceivedAt time.Time `json:"received_at"`
}

// NodeHealth is one node of GET /v1/nodes/health.
type NodeHealth struct {
	Node       string   `json:"node"`
	State      []string `json:"state"`      // as Slurm shows it at the last cycle
	Reason     string   `json:"reason"`     // Slurm's reason
	Partitions []string `json:"partitions"` // the node's
	// DrainedByStrata is true while Strata holds the node drained;
	// StrataReason is the reason it drained it with.
	DrainedByStrata bool         `json:"drained_by_strata"`
	StrataReason    string       `json:"strata_reason,omitempty"`
	DrainedAt       *time.Time   `json:"drained_at,omitempty"`
	ResumedAt       *time.Time   `json:"resumed_at,omitempty"`
	Faults          []Fault      `json:"faults"` // within max_fault_age, oldest first
	LastCheck       *HealthCheck `json:"last_check,omitempty"`
}

// HealthCheck is the last health check of a node.
type HealthCheck struct {
	At     time.Time `json:"at"`
	Passed bool      `json:"passed"`
	Output string    `json:"output"`
}

// NodesHealth is the answer of GET /v1/nodes/health.
type NodesHealth struct {
	Nodes []NodeHealth `json:"nodes"`
}

// Handover is one job that started on a GPU a reclaim freed (a
// beneficiary), and the GPU time it ran there that only the reclaim made
// possible.
type Handover struct {
	JobID   int64  `json:"job_id"`
	Tenant  string `json:"tenant,omitempty"`
	Account string `json:"account,omitempty"`
	GPU     GPU    `json:"gpu"`
	// Start is when it started on the GPU; End when it ended (nil: it
	// ran when last seen).
	Start time.Time  `json:"start"`
	End   *time.Time `json:"end,omitempty"`
	// CountedUntil is the end of the time counted: End (or the last
	// cycle), at most the reclaimed job's time-limit end.
	CountedUntil time.Time `json:"counted_until"`
	// GPUSeconds is CountedUntil − Start: measured.
	GPUSeconds float64 `json:"gpu_seconds"`
	// StartGainSeconds is the reclaimed job's time-limit end − Start:
	// how much sooner it started than the GPU would otherwise have been
	// free. An estimate: the reclaimed job might have ended sooner by
	// itself, which cannot be known.
	StartGainSeconds float64 `json:"start_gain_seconds"`
}

// ReclaimWorth is one reclaim carried out (a requeue or cancel), with the
// upper bound of what it freed and what was observed of it.
type ReclaimWorth struct {
	RecordID int64  `json:"record_id"`
	JobID    int64  `json:"job_id"`
	Tenant   string `json:"tenant,omitempty"`
	Account  string `json:"account,omitempty"`
	Rule     string `json:"rule,omitempty"`
	Kind     string `json:"action"`
	// At is when the action ran; LimitEnd when the job's time limit would
	// have ended the run (nil: no limit, and neither figure).
	At       time.Time  `json:"at"`
	LimitEnd *time.Time `json:"limit_end,omitempty"`
	GPUs     []GPU      `json:"gpus"`
	// BoundGPUSeconds is the GPUs × (LimitEnd − At): the most the reclaim
	// could give. ObservedGPUSeconds is the sum of HandedTo's GPUSeconds:
	// what waiting jobs ran on the freed GPUs before LimitEnd.
	BoundGPUSeconds    float64 `json:"bound_gpu_seconds"`
	ObservedGPUSeconds float64 `json:"observed_gpu_seconds"`
	// Final is true once LimitEnd has passed: nothing more is counted.
	Final    bool       `json:"final"`
	HandedTo []Handover `json:"handed_to"`
}

// WorthTotal sums the reclaims of one tenant (the reclaimed jobs') and
// rule in a Worth answer.
type WorthTotal struct {
	Tenant             string  `json:"tenant"`
	Rule               string  `json:"rule"`
	Reclaims           int     `json:"reclaims"`
	BoundGPUSeconds    float64 `json:"bound_gpu_seconds"`
	ObservedGPUSeconds float64 `json:"observed_gpu_seconds"`
	// Beneficiaries counts the jobs handed a GPU (once per reclaim);
	// StartGainSeconds sums each one's largest start gain (estimated).
	Beneficiaries    int     `json:"beneficiaries"`
	StartGainSeconds float64 `json:"start_gain_seconds"`
}

// Worth is the answer of GET /v1/worth: the reclaims, oldest first, and
// their totals by tenant and rule.
type Worth struct {
	Reclaims []ReclaimWorth `json:"reclaims"`
	Totals   []WorthTotal   `json:"totals"`
}
