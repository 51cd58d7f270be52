package jobpolicy

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/strata-hpc/strata/internal/slurmrest"
)

// Job is what the check reads of a job, as slurmctld gives job_submit.lua
// its job_desc: a zero field is one the job does not set (Slurm's NO_VAL),
// so a rule fills it in or leaves it to Slurm. One component of a
// heterogeneous job is checked alone (job_submit.lua sums the GPUs of a
// heterogeneous job's components; the portal submits none).
type Job struct {
	// Account is --account; DefaultAccount the user's default account in
	// Slurm, which counts when neither the job nor the policy names one.
	Account        string
	DefaultAccount string
	Partition      string
	QOS            string
	// Comment is --comment, where strata:class=<name> chooses the class.
	Comment string
	// TimeLimit is --time in minutes; [Unlimited] for no limit.
	TimeLimit int64
	// MinNodes and MaxNodes are -N min[-max].
	MinNodes, MaxNodes int
	// NumTasks is -n; TasksPerNode --ntasks-per-node; SocketsPerNode
	// --sockets-per-node.
	NumTasks, TasksPerNode, SocketsPerNode int
	// The GPU request as Slurm's TRES strings: --gpus ("gres/gpu:8"),
	// --gpus-per-node or --gres, --gpus-per-socket, --gpus-per-task.
	TRESPerJob, TRESPerNode, TRESPerSocket, TRESPerTask string
	// Exclusive is --exclusive (whole nodes; Slurm's shared=0).
	Exclusive bool
	// Requeue is --requeue (true) or --no-requeue (false); nil: not set.
	Requeue *bool
	// Switches is --switches; 0: not set.
	Switches int
	// Container is --container, the OCI bundle the job runs in (Slurm's
	// own container support): job_desc.container, which job_submit.lua
	// reads too; it names the image by its path under the policy's
	// bundle directory.
	Container string
	// Image is the container image a portal job runs in by pyxis or
	// Apptainer. job_submit.lua cannot see it: pyxis's --container-image
	// is a SPANK option of srun, and apptainer a command of the script,
	// neither in job_desc; only the portal's check reads it.
	Image string
}

// Unlimited is the time limit of a job that asks for none (Slurm's
// INFINITE, --time=UNLIMITED).
const Unlimited int64 = 4294967295

// maxGPUs is more GPUs than any job gets: a count above it is refused
// before any limit, as job_submit.lua does, so that no count passes a
// limit by wrapping.
const maxGPUs = 1<<31 - 1

// Refusal is why the policy refuses a job: the Slurm error code
// job_submit.lua returns, by its name in slurm_errno.h, and the message
// sbatch prints, "strata: ... (policy.yaml:NN)".
type Refusal struct {
	// Code is the error's name: ESLURM_INVALID_ACCOUNT, ESLURM_INVALID_QOS,
	// ESLURM_INVALID_PARTITION_NAME, ESLURM_INVALID_TIME_LIMIT or
	// ESLURM_ACCOUNTING_POLICY.
	Code string
	// Message is the message, whole, with the policy line when the rule
	// has one.
	Message string
	// Line is the line of the policy file the message cites; 0 for none.
	Line int
	// Facts are the message's parts, for a page to say in its own
	// language.
	Facts
}

// Facts are a refusal's parts, as fields: which rule refused the job
// and the values its message names. Only the fields the rule names are
// set.
type Facts struct {
	// Rule names the rule: member, viewer, no_default_class,
	// unknown_class, class_not_allowed, qos, partition, time_limit,
	// gpu_count, class_gpus, gpus, gpu_type_denied, gpu_type,
	// whole_nodes, container, no_images, image.
	Rule string
	// Owner is whose rule it is: the account, tenant or class (for
	// member and viewer, the account; the user is User).
	Owner string
	// User is the user refused.
	User string
	// Class is the job's class.
	Class string
	// Limit is the limit's value, as the message writes it ("8",
	// "2-00:00:00"); Asked is what the job asks, the same way.
	Limit, Asked string
	// Unit is the unit of Limit and Asked: "gpus" or "time".
	Unit string
	// Item is what the rule is about: the GPU type, the image, the
	// container, the partition or QOS asked for.
	Item string
	// Allowed is what the rule allows instead (classes, images), as the
	// message lists them.
	Allowed string
}

// Error returns the message.
func (r *Refusal) Error() string { return r.Message }

// with sets the refusal's facts.
func (r *Refusal) with(f Facts) *Refusal {
	r.Facts = f
	return r
}

// Decision is what job_submit.lua does with a job.
type Decision struct {
	// Managed is false for a job whose account the policy does not
	// manage: it passes untouched, and nothing else is set.
	Managed bool
	// Class is the job's workload class; ClassFrom says how it was
	// chosen: "comment", "partition" or "default".
	Class, ClassFrom string
	// Refusal is why the job is refused; nil when it passes.
	Refusal *Refusal
	// Job is the job as it passes, with what the plugin fills in:
	// the account (the user's default in the policy), the partition and
	// QOS of the class, its default time, the requeue flag and --switches
	// for a job on several nodes. The job as given when it is refused.
	Job Job
	// Applied lists what was filled in, as the plugin logs it:
	// "partition=gpu", "qos=train", "time_limit=1440", "switches=1".
	Applied []string
}

// Check returns why the policy refuses job of user, or nil when it passes
// (also when the policy does not manage its account).
func (p *Policy) Check(user string, job Job) *Refusal { return p.Decide(user, job).Refusal }

// classRE is the class a comment names (job_submit.lua's
// "strata:class=([%w_%-%.]+)").
var classRE = regexp.MustCompile(`strata:class=([A-Za-z0-9_.-]+)`)

// Decide decides as job_submit.lua's slurm_job_submit does for one job
// (classify, check_job, then apply): the same class, the same refusal
// with the same message and line, the same fields filled in.
func (p *Policy) Decide(user string, job Job) Decision {
	d := Decision{Job: job}
	// classify
	account, fromPolicy := job.Account, false
	if account == "" {
		if a, ok := p.Users[user]; ok {
			account, fromPolicy = a, true
		} else {
			account = job.DefaultAccount
		}
	}
	acct, ok := p.Accounts[account]
	if account == "" || !ok {
		return d
	}
	d.Managed = true
	var why string
	if m := classRE.FindStringSubmatch(job.Comment); m != nil {
		d.Class, d.ClassFrom, why = m[1], "comment", "from --comment"
	} else if c, ok := p.Partitions[job.Partition]; job.Partition != "" && ok {
		d.Class, d.ClassFrom, why = c, "partition", "the class of partition "+job.Partition
	} else if p.DefaultClass != "" {
		d.Class, d.ClassFrom, why = p.DefaultClass, "default", "the default class"
	} else {
		d.Refusal = &Refusal{Code: "ESLURM_INVALID_QOS", Message: "strata: the policy has no default class: choose the class with " +
			"--comment=strata:class=<name>; the classes are " + names(p.Classes),
			Facts: Facts{Rule: "no_default_class", Allowed: names(p.Classes)}}
		return d
	}
	if d.Refusal = p.check(user, account, acct, d.Class, d.ClassFrom, why, job); d.Refusal != nil {
		return d
	}
	// apply
	class := p.Classes[d.Class]
	out := &d.Job
	if fromPolicy {
		out.Account = account
		d.Applied = append(d.Applied, "account="+account)
	}
	if job.Partition == "" {
		out.Partition = class.Partition
		d.Applied = append(d.Applied, "partition="+class.Partition)
	}
	if job.QOS == "" {
		out.QOS = d.Class
		d.Applied = append(d.Applied, "qos="+d.Class)
	}
	if job.TimeLimit == 0 && class.DefaultTime > 0 {
		out.TimeLimit = class.DefaultTime
		d.Applied = append(d.Applied, fmt.Sprintf("time_limit=%d", class.DefaultTime))
	}
	if job.Requeue == nil {
		rq := class.Requeue
		out.Requeue = &rq
		d.Applied = append(d.Applied, "requeue="+map[bool]string{true: "1", false: "0"}[rq])
	}
	if multiNode(job) && class.Switches > 0 && job.Switches == 0 {
		out.Switches = class.Switches
		d.Applied = append(d.Applied, fmt.Sprintf("switches=%d", class.Switches))
	}
	return d
}

func multiNode(j Job) bool { return j.MinNodes > 1 || j.MaxNodes > 1 }

// check is job_submit.lua's check_job.
func (p *Policy) check(user, account string, acct Account, className, from, why string, job Job) *Refusal {
	fail := func(code string, line int, format string, args ...any) *Refusal {
		msg := "strata: " + fmt.Sprintf(format, args...)
		if line > 0 {
			msg += fmt.Sprintf(" (%s:%d)", p.Source, line)
		} else {
			line = 0
		}
		return &Refusal{Code: code, Message: msg, Line: line}
	}
	if !contains(acct.Members, user) {
		if line, viewer := acct.Viewers[user]; viewer {
			return fail("ESLURM_INVALID_ACCOUNT", line, "user %s is not a member of account %s: a viewer cannot submit jobs", user, account).
				with(Facts{Rule: "viewer", User: user, Owner: account})
		}
		return fail("ESLURM_INVALID_ACCOUNT", acct.Line, "user %s is not a member of account %s", user, account).
			with(Facts{Rule: "member", User: user, Owner: account})
	}
	class, known := p.Classes[className]
	if from == "comment" && !known {
		return fail("ESLURM_INVALID_QOS", p.ClassesLine, "there is no class %s (--comment=strata:class=%s); the classes are %s",
			className, className, names(p.Classes)).with(Facts{Rule: "unknown_class", Class: className, Allowed: names(p.Classes)})
	}
	if !contains(acct.Classes, className) {
		return fail("ESLURM_INVALID_QOS", acct.ClassesLine, "account %s may not use class %s; it may use %s",
			account, className, strings.Join(uniqueSorted(acct.Classes), ", ")).
			with(Facts{Rule: "class_not_allowed", Owner: account, Class: className, Allowed: strings.Join(uniqueSorted(acct.Classes), ", ")})
	}
	if job.QOS != "" && job.QOS != className {
		return fail("ESLURM_INVALID_QOS", class.Line, "the QOS of a job is its class, %s (%s): leave out --qos=%s, "+
			"or choose the class with --comment=strata:class=<name>", className, why, job.QOS).
			with(Facts{Rule: "qos", Class: className, Item: job.QOS})
	}
	if from == "comment" && job.Partition != "" && job.Partition != class.Partition {
		return fail("ESLURM_INVALID_PARTITION_NAME", class.Line, "class %s runs in partition %s, not %s: leave out --partition",
			className, class.Partition, job.Partition).
			with(Facts{Rule: "partition", Class: className, Allowed: class.Partition, Item: job.Partition})
	}
	if job.TimeLimit != 0 && class.MaxTime > 0 && (job.TimeLimit == Unlimited || job.TimeLimit > class.MaxTime) {
		return fail("ESLURM_INVALID_TIME_LIMIT", class.MaxTimeLine, "class %s allows at most %s; this job asks for %s",
			className, Minutes(class.MaxTime), Minutes(job.TimeLimit)).
			with(Facts{Rule: "time_limit", Owner: className, Class: className, Limit: Minutes(class.MaxTime), Asked: Minutes(job.TimeLimit), Unit: "time"})
	}
	n, byType := GPUs(job)
	most := n
	for _, m := range byType {
		most = math.Max(most, m)
	}
	if most > maxGPUs {
		return fail("ESLURM_ACCOUNTING_POLICY", 0, "this job asks for more than %d GPUs (--gpus, --gres or --gpus-per-*: %s); give the count it needs",
			maxGPUs, gpuRequest(job)).
			with(Facts{Rule: "gpu_count", Limit: strconv.Itoa(maxGPUs), Asked: gpuRequest(job), Unit: "gpus"})
	}
	if class.MaxGPUsPerJob > 0 && n > float64(class.MaxGPUsPerJob) {
		return fail("ESLURM_ACCOUNTING_POLICY", class.MaxGPUsLine, "class %s allows at most %d GPUs per job; this job asks for %d",
			className, class.MaxGPUsPerJob, int64(n)).
			with(Facts{Rule: "class_gpus", Owner: className, Class: className, Limit: strconv.FormatInt(int64(class.MaxGPUsPerJob), 10), Asked: strconv.FormatInt(int64(n), 10), Unit: "gpus"})
	}
	if acct.GPUs != nil && n > float64(acct.GPUs.Limit) {
		return fail("ESLURM_ACCOUNTING_POLICY", acct.GPUs.Line, "%s may use at most %d GPUs; this job asks for %d",
			acct.GPUs.Owner, acct.GPUs.Limit, int64(n)).
			with(Facts{Rule: "gpus", Owner: acct.GPUs.Owner, Limit: strconv.FormatInt(int64(acct.GPUs.Limit), 10), Asked: strconv.FormatInt(int64(n), 10), Unit: "gpus"})
	}
	for _, typ := range sortedKeys(byType) {
		l, ok := acct.GPUsByType[typ]
		if !ok || byType[typ] <= float64(l.Limit) {
			continue
		}
		if l.Limit == 0 {
			return fail("ESLURM_ACCOUNTING_POLICY", l.Line, "%s may not use %s GPUs", l.Owner, typ).
				with(Facts{Rule: "gpu_type_denied", Owner: l.Owner, Item: typ})
		}
		return fail("ESLURM_ACCOUNTING_POLICY", l.Line, "%s may use at most %d %s GPUs; this job asks for %d",
			l.Owner, l.Limit, typ, int64(byType[typ])).
			with(Facts{Rule: "gpu_type", Owner: l.Owner, Item: typ, Limit: strconv.FormatInt(int64(l.Limit), 10), Asked: strconv.FormatInt(int64(byType[typ]), 10), Unit: "gpus"})
	}
	if class.WholeNodes && multiNode(job) && !job.Exclusive {
		return fail("ESLURM_ACCOUNTING_POLICY", class.WholeNodesLine, "class %s runs jobs on several nodes on whole nodes only: add --exclusive", className).
			with(Facts{Rule: "whole_nodes", Owner: className, Class: className})
	}
	return p.checkImage(acct, job, fail)
}

// checkImage is job_submit.lua's check_image: the image of the job's
// --container (and the portal's image) must be on its tenant's
// allow-list.
func (p *Policy) checkImage(acct Account, job Job, fail func(code string, line int, format string, args ...any) *Refusal) *Refusal {
	for _, c := range []struct{ image, container string }{{"", job.Container}, {job.Image, ""}} {
		image := c.image
		if c.container != "" {
			img, ok := imageOfBundle(p.Bundles(), c.container)
			if !ok {
				return fail("ESLURM_ACCOUNTING_POLICY", acct.ImagesLine, "--container=%s is not the bundle of an image: run an image tenant %s may run, from its bundle %s/<image>",
					c.container, acct.Tenant, p.Bundles()).with(Facts{Rule: "container", Owner: acct.Tenant, Item: c.container, Allowed: p.Bundles()})
			}
			image = img
		}
		switch {
		case image == "", ImageAllowed(acct.Images, image):
		case len(acct.Images) == 0:
			return fail("ESLURM_ACCOUNTING_POLICY", acct.ImagesLine, "tenant %s may run no container images (%s): add the image to the tenant's images",
				acct.Tenant, image).with(Facts{Rule: "no_images", Owner: acct.Tenant, Item: image})
		default:
			return fail("ESLURM_ACCOUNTING_POLICY", acct.ImagesLine, "tenant %s may not run container image %s; it may run %s",
				acct.Tenant, image, strings.Join(acct.Images, ", ")).
				with(Facts{Rule: "image", Owner: acct.Tenant, Item: image, Allowed: strings.Join(acct.Images, ", ")})
		}
	}
	return nil
}

// Minutes formats a time limit in minutes as Slurm does: "2-00:00:00",
// "04:00:00", "UNLIMITED".
func Minutes(m int64) string {
	if m == Unlimited {
		return "UNLIMITED"
	}
	d, h, min := m/1440, (m%1440)/60, m%60
	s := fmt.Sprintf("%02d:%02d:00", h, min)
	if d > 0 {
		return fmt.Sprintf("%d-%s", d, s)
	}
	return s
}

func names[V any](m map[string]V) string { return strings.Join(sortedKeys(m), ", ") }

func uniqueSorted(list []string) []string {
	out := append([]string(nil), list...)
	sort.Strings(out)
	for i := len(out) - 1; i > 0; i-- {
		if out[i] == out[i-1] {
			out = append(out[:i], out[i+1:]...)
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// GPUs returns the fewest GPUs job can run with, in all and by type, as
// job_submit.lua counts them: per node times the nodes it asks for at
// least, per socket times sockets per node (1 when not given) and nodes,
// per task times its tasks; the request fields describe the same GPUs
// from different sides, so the job gets the largest of them. Counts are
// floats, as Lua's are, so that a huge count neither wraps nor passes a
// limit.
func GPUs(job Job) (float64, map[string]float64) {
	nodes := max(job.MinNodes, 1)
	tasks := job.NumTasks
	if tasks == 0 {
		tasks = max(job.TasksPerNode, 1) * nodes
	}
	sockets := job.SocketsPerNode
	if sockets == 0 {
		sockets = 1
	}
	var total float64
	byType := map[string]float64{}
	for _, f := range []struct {
		s     string
		times int
	}{{job.TRESPerJob, 1}, {job.TRESPerNode, nodes}, {job.TRESPerSocket, sockets * nodes}, {job.TRESPerTask, tasks}} {
		if f.s == "" {
			continue
		}
		var sum float64
		types := map[string]float64{}
		for _, item := range strings.Split(f.s, ",") {
			if item == "" {
				continue
			}
			n, typ, ok := gpuEntry(item)
			if !ok {
				continue
			}
			sum += n
			if typ != "" {
				types[typ] += n
			}
		}
		total = math.Max(total, sum*float64(f.times))
		for typ, n := range types {
			byType[typ] = math.Max(byType[typ], n*float64(f.times))
		}
	}
	return total, byType
}

var suffixes = map[byte]float64{'k': 1024, 'm': 1024 * 1024, 'g': 1 << 30, 't': 1 << 40, 'p': 1 << 50}

// gpuEntry reads one entry of a TRES request: "gres/gpu:2",
// "gres/gpu:h100:2", "gres:gpu:2" (the older spelling), "gpu:2",
// "gres/gpu=2" and "gres/gpu:h100=2" (tres_per_task), "gres/gpu" (one).
// ok is false when it is not a GPU or not a count Slurm accepts.
func gpuEntry(item string) (n float64, typ string, ok bool) {
	if i := strings.IndexByte(item, '('); i >= 0 {
		item = item[:i]
	}
	item = strings.Trim(item, " \t\n\v\f\r")
	var rest string
	switch {
	case strings.HasPrefix(item, "gres/gpu"), strings.HasPrefix(item, "gres:gpu"):
		rest = item[len("gres/gpu"):]
	case strings.HasPrefix(item, "gpu"):
		rest = item[len("gpu"):]
	default:
		return 0, "", false
	}
	if rest != "" && rest[0] != ':' && rest[0] != '=' {
		return 0, "", false // gres/gpumem, gres/gpus...
	}
	num, hasNum := "", false
	if head, eq, found := strings.Cut(rest, "="); found {
		rest, num, hasNum = head, eq, true
	}
	var fields []string
	for _, f := range strings.Split(rest, ":") {
		if f != "" {
			fields = append(fields, f)
		}
	}
	if !hasNum && len(fields) > 0 && countRE.MatchString(fields[len(fields)-1]) {
		num, hasNum = fields[len(fields)-1], true
		fields = fields[:len(fields)-1]
	}
	if len(fields) > 0 {
		typ = fields[0]
	}
	if !hasNum {
		return 1, typ, true
	}
	if !countRE.MatchString(num) {
		return 0, "", false
	}
	digits, mult := num, 1.0
	if c := num[len(num)-1]; c < '0' || c > '9' {
		digits, mult = num[:len(num)-1], suffixes[c|0x20]
	}
	f, err := strconv.ParseFloat(digits, 64)
	if err != nil {
		return 0, "", false
	}
	return f * mult, typ, true
}

var countRE = regexp.MustCompile(`^[0-9]+[kKmMgGtTpP]?$`)

// gpuRequest is the job's GPU request fields as given, for a message.
func gpuRequest(j Job) string {
	var out []string
	for _, f := range []struct{ k, v string }{{"tres_per_job", j.TRESPerJob}, {"tres_per_node", j.TRESPerNode},
		{"tres_per_socket", j.TRESPerSocket}, {"tres_per_task", j.TRESPerTask}} {
		if f.v != "" {
			out = append(out, f.k+"="+f.v)
		}
	}
	return strings.Join(out, " ")
}

// FromSpec is the job a submission through slurmrestd asks slurmctld for:
// the fields of spec the check reads, as job_submit.lua sees them (the
// time limit in whole minutes, rounded up as the client rounds it; the
// node count or range as its least and most nodes).
func FromSpec(spec slurmrest.JobSpec) Job {
	j := Job{Account: spec.Account, Partition: spec.Partition, QOS: spec.QOS, Comment: spec.Comment,
		TRESPerNode: spec.TRESPerNode, NumTasks: spec.Tasks, TasksPerNode: spec.TasksPerNode,
		Exclusive: spec.Exclusive, Switches: spec.Switches, Container: spec.Container}
	if spec.Requeue != nil {
		rq := *spec.Requeue
		j.Requeue = &rq
	}
	if spec.TimeLimit > 0 {
		j.TimeLimit = int64((spec.TimeLimit + time.Minute - 1) / time.Minute)
	}
	j.MinNodes, j.MaxNodes = nodeRange(spec.Nodes)
	return j
}

// nodeRange reads a node count ("2") or range ("1-4"); 0, 0 when it is
// not one (Slurm refuses the job itself).
func nodeRange(s string) (int, int) {
	lo, hi, isRange := strings.Cut(strings.TrimSpace(s), "-")
	a, err := strconv.Atoi(lo)
	if err != nil || a < 0 {
		return 0, 0
	}
	if !isRange {
		return a, a
	}
	b, err := strconv.Atoi(hi)
	if err != nil || b < 0 {
		return 0, 0
	}
	return a, b
}
