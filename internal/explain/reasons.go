package explain

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/strata-hpc/strata/internal/slurmrest"
)

// Why says why a pending job waits.
type Why struct {
	// Reason is Slurm's reason code (squeue %r), "" when Slurm has none
	// yet.
	Reason string `json:"reason"`
	// Meaning is what the code means in general.
	Meaning string `json:"meaning"`
	// Detail is this job's case with its numbers: "project acme-llm uses
	// 60 of its 64 GPUs; this job asks for 8".
	Detail string `json:"detail"`
	// Limit is the limit that holds the job, when one does.
	Limit *Blocker `json:"limit,omitempty"`
	// Hint says what would let the job start.
	Hint string `json:"hint,omitempty"`
}

// Blocker is the limit a job waits on.
type Blocker struct {
	// Level is who holds the limit: "project acme-llm", "user alice in
	// acme-llm", "QOS train", "partition gpu".
	Level string `json:"level"`
	Limit Limit  `json:"limit"`
	// Ask is what the job asks for, in the limit's unit.
	Ask float64 `json:"ask"`
}

// check is how a reason is explained from the snapshot.
type check int

const (
	checkNone       check = iota // the meaning says it all
	checkAssocTRES               // an association's GrpTRES, from the user's association up
	checkAssocMins               // an association's GrpTRESMins (GPU-hour budget)
	checkAssocJobs               // an association's GrpJobs
	checkQOSTRES                 // the QOS's GrpTRES
	checkQOSUser                 // the QOS's MaxTRESPerUser
	checkQOSJob                  // the QOS's MaxTRESPerJob
	checkQOSWall                 // the QOS's MaxWall
	checkPartTime                // the partition's MaxTime
	checkResources               // free resources of the partition
	checkPriority                // fair-share standing
	checkNodes                   // nodes not available
	checkDependency              // the job's dependency
	checkBegin                   // the job's eligible time
	checkHeldUser                // held by its owner
)

type reasonInfo struct {
	check check
	// family is the TRES family a TRES check looks at: "gres" (every
	// gres/* key, GPUs with and without type), "cpu", "mem" or "node".
	family  string
	meaning string
}

// reasons are Slurm's reason codes (job_reason_string in
// src/common/slurm_protocol_defs.c; squeue(1) JOB REASON CODES) that
// matter on a cluster the policy runs, in plain words. Codes not here get
// a meaning from their prefix (see Meaning).
var reasons = map[string]reasonInfo{
	"":     {checkNone, "", "Slurm has not looked at the job yet"},
	"None": {checkNone, "", "Slurm has not looked at the job yet"},

	"AssocGrpGRES":            {checkAssocTRES, "gres", "an account's limit on GPUs held at once (GrpTRES) is reached"},
	"AssocGrpCpuLimit":        {checkAssocTRES, "cpu", "an account's limit on CPUs held at once (GrpTRES) is reached"},
	"AssocGrpMemLimit":        {checkAssocTRES, "mem", "an account's limit on memory held at once (GrpTRES) is reached"},
	"AssocGrpNodeLimit":       {checkAssocTRES, "node", "an account's limit on nodes held at once (GrpTRES) is reached"},
	"AssocGrpGRESMinutes":     {checkAssocMins, "gres", "an account's GPU-hour budget (GrpTRESMins) is used up"},
	"AssocGrpCPUMinutesLimit": {checkAssocMins, "cpu", "an account's CPU-minute budget (GrpTRESMins) is used up"},
	"AssocGrpMemMinutes":      {checkAssocMins, "mem", "an account's memory-minute budget (GrpTRESMins) is used up"},
	"AssocGrpNodeMinutes":     {checkAssocMins, "node", "an account's node-minute budget (GrpTRESMins) is used up"},
	"AssocGrpJobsLimit":       {checkAssocJobs, "", "an account runs as many jobs as it may at once (GrpJobs)"},
	"AssocGrpSubmitJobsLimit": {checkNone, "", "an account has as many jobs running or pending as it may (GrpSubmitJobs)"},
	"AssocGrpGRESRunMinutes":  {checkNone, "", "the running jobs of an account hold as many GPU-minutes as it may (GrpTRESRunMins)"},
	"AssocGrpWallLimit":       {checkNone, "", "the running jobs of an account hold as much wall time as it may (GrpWall)"},
	"AssocMaxJobsLimit":       {checkNone, "", "the user runs as many jobs in the account as the user may (MaxJobs)"},
	"AssocMaxSubmitJobLimit":  {checkNone, "", "the user has as many jobs in the account as the user may (MaxSubmitJobs)"},
	"AssocMaxGRESPerJob":      {checkNone, "", "the job asks for more GPUs than one job of the account may have (MaxTRESPerJob)"},
	"AssocMaxCpuPerJobLimit":  {checkNone, "", "the job asks for more CPUs than one job of the account may have (MaxTRESPerJob)"},
	"AssocMaxNodePerJobLimit": {checkNone, "", "the job asks for more nodes than one job of the account may have (MaxTRESPerJob)"},
	"AssocMaxWallDurationPerJobLimit": {checkNone, "",
		"the job's time limit is longer than the account allows (MaxWallDurationPerJob)"},
	"AssociationJobLimit":      {checkNone, "", "an account's job limit is reached"},
	"AssociationResourceLimit": {checkNone, "", "an account's resource limit is reached"},
	"AssociationTimeLimit":     {checkNone, "", "an account's time limit is reached"},

	"QOSGrpGRES":                    {checkQOSTRES, "gres", "the QOS's limit on GPUs held at once (GrpTRES) is reached"},
	"QOSGrpCpuLimit":                {checkQOSTRES, "cpu", "the QOS's limit on CPUs held at once (GrpTRES) is reached"},
	"QOSGrpMemLimit":                {checkQOSTRES, "mem", "the QOS's limit on memory held at once (GrpTRES) is reached"},
	"QOSGrpNodeLimit":               {checkQOSTRES, "node", "the QOS's limit on nodes held at once (GrpTRES) is reached"},
	"QOSGrpGRESMinutes":             {checkNone, "", "the QOS's GPU-minute budget (GrpTRESMins) is used up"},
	"QOSGrpJobsLimit":               {checkNone, "", "the QOS runs as many jobs as it may at once (GrpJobs)"},
	"QOSGrpSubmitJobsLimit":         {checkNone, "", "the QOS has as many jobs running or pending as it may (GrpSubmitJobs)"},
	"QOSMaxGRESPerUser":             {checkQOSUser, "gres", "the user holds as many GPUs in the QOS as one user may (MaxTRESPerUser)"},
	"QOSMaxCpuPerUserLimit":         {checkQOSUser, "cpu", "the user holds as many CPUs in the QOS as one user may (MaxTRESPerUser)"},
	"QOSMaxMemoryPerUser":           {checkQOSUser, "mem", "the user holds as much memory in the QOS as one user may (MaxTRESPerUser)"},
	"QOSMaxNodePerUserLimit":        {checkQOSUser, "node", "the user holds as many nodes in the QOS as one user may (MaxTRESPerUser)"},
	"QOSMaxGRESPerJob":              {checkQOSJob, "gres", "the job asks for more GPUs than one job of the QOS may have (MaxTRESPerJob)"},
	"QOSMaxCpuPerJobLimit":          {checkQOSJob, "cpu", "the job asks for more CPUs than one job of the QOS may have (MaxTRESPerJob)"},
	"QOSMaxMemoryPerJob":            {checkQOSJob, "mem", "the job asks for more memory than one job of the QOS may have (MaxTRESPerJob)"},
	"QOSMaxNodePerJobLimit":         {checkQOSJob, "node", "the job asks for more nodes than one job of the QOS may have (MaxTRESPerJob)"},
	"QOSMaxGRESPerNode":             {checkNone, "", "the job asks for more GPUs per node than the QOS allows (MaxTRESPerNode)"},
	"QOSMaxJobsPerUserLimit":        {checkNone, "", "the user runs as many jobs in the QOS as one user may (MaxJobsPerUser)"},
	"QOSMaxSubmitJobPerUserLimit":   {checkNone, "", "the user has as many jobs in the QOS as one user may (MaxSubmitJobsPerUser)"},
	"QOSMaxWallDurationPerJobLimit": {checkQOSWall, "", "the job's time limit is longer than the QOS allows (MaxWall)"},
	"QOSJobLimit":                   {checkNone, "", "the QOS's job limit is reached"},
	"QOSResourceLimit":              {checkNone, "", "the QOS's resource limit is reached"},
	"QOSTimeLimit":                  {checkNone, "", "the QOS's time limit is reached"},
	"QOSUsageThreshold":             {checkNone, "", "the QOS's usage threshold is passed"},
	"QOSNotAllowed":                 {checkNone, "", "the account or the partition does not allow the job's QOS (class)"},
	"InvalidQOS":                    {checkNone, "", "the job's QOS is not valid"},
	"MaxGRESPerAccount":             {checkNone, "", "the account holds as many GPUs in the QOS as one account may (MaxTRESPerAccount)"},
	"MaxJobsPerAccount":             {checkNone, "", "the account runs as many jobs in the QOS as one account may (MaxJobsPerAccount)"},

	"Priority":  {checkPriority, "", "jobs of higher priority wait for the same resources and go first"},
	"Resources": {checkResources, "", "the resources the job asks for are in use; it is next in line for them"},
	"ReqNodeNotAvail": {checkNodes, "",
		"a node the job needs is not available (down, drained, reserved or in use)"},
	"NodeDown":                 {checkNone, "", "a node the job needs is down"},
	"Dependency":               {checkDependency, "", "the job waits for other jobs (its dependency)"},
	"DependencyNeverSatisfied": {checkDependency, "", "the job's dependency can never be met: it will not start"},
	"JobHeldUser":              {checkHeldUser, "", "the job is held by its owner or a coordinator"},
	"JobHeldAdmin":             {checkNone, "", "an administrator holds the job"},
	"JobHoldMaxRequeue":        {checkNone, "", "the job was requeued too many times and is held"},
	"BeginTime":                {checkBegin, "", "the job may not start yet (its begin time, or the pause after a requeue)"},
	"PartitionTimeLimit":       {checkPartTime, "", "the job's time limit is longer than the partition allows (MaxTime)"},
	"PartitionNodeLimit":       {checkNone, "", "the job asks for more or fewer nodes than the partition allows, or its nodes are down"},
	"PartitionDown":            {checkNone, "", "the job's partition is down"},
	"PartitionInactive":        {checkNone, "", "the job's partition is inactive"},
	"PartitionConfig":          {checkNone, "", "the job breaks a limit of its partition"},
	"AccountNotAllowed":        {checkNone, "", "the partition does not allow the job's account"},
	"InvalidAccount":           {checkNone, "", "the job's account is not valid (the user has no association with it)"},
	"AccountingPolicy":         {checkNone, "", "an accounting limit holds the job"},
	"Reservation":              {checkNone, "", "the job waits for its reservation to start"},
	"ReservationDeleted":       {checkNone, "", "the job's reservation no longer exists"},
	"Licenses":                 {checkNone, "", "the job waits for a license"},
	"Cleaning":                 {checkNone, "", "the job was requeued and its last run is still cleaning up"},
	"Prolog":                   {checkNone, "", "the job's prolog is still running"},
	"BadConstraints":           {checkNone, "", "no node can satisfy the job's constraints"},
	"Constraints":              {checkNone, "", "no node can satisfy the job's constraints now"},
	"JobArrayTaskLimit":        {checkNone, "", "the job array runs as many tasks at once as it may"},
	"MaxMemPerLimit":           {checkNone, "", "the job asks for more memory per CPU or per node than allowed"},
}

// Meaning is what Slurm's reason code means, in plain words.
func Meaning(code string) string {
	if r, ok := reasons[code]; ok {
		return r.meaning
	}
	switch {
	case strings.HasPrefix(code, "AssocGrp"):
		return "an account has reached an aggregate limit (" + code + ")"
	case strings.HasPrefix(code, "AssocMax"):
		return "the job asks for more than one job or user of the account may have (" + code + ")"
	case strings.HasPrefix(code, "QOSGrp"):
		return "the QOS has reached an aggregate limit (" + code + ")"
	case strings.HasPrefix(code, "QOSMax"):
		return "the job asks for more than one job or user of the QOS may have (" + code + ")"
	case strings.HasPrefix(code, "QOSMin"):
		return "the job asks for less than the QOS requires (" + code + ")"
	case strings.HasPrefix(code, "Max") && strings.HasSuffix(code, "PerAccount"):
		return "the account has reached a per-account limit of the QOS (" + code + ")"
	}
	return "Slurm's reason " + code + " (see JOB REASON CODES in squeue(1))"
}

// why explains why a pending job waits.
func (x *index) why(j slurmrest.Job) *Why {
	r, known := reasons[j.StateReason]
	w := &Why{Reason: j.StateReason, Meaning: Meaning(j.StateReason)}
	w.Detail = w.Meaning
	if !known {
		return w
	}
	switch r.check {
	case checkAssocTRES:
		x.whyAssocTRES(w, j, r.family)
	case checkAssocMins:
		x.whyAssocMins(w, j, r.family)
	case checkAssocJobs:
		x.whyAssocJobs(w, j)
	case checkQOSTRES, checkQOSUser, checkQOSJob:
		x.whyQOSTRES(w, j, r.check, r.family)
	case checkQOSWall:
		x.whyQOSWall(w, j)
	case checkPartTime:
		x.whyPartTime(w, j)
	case checkResources:
		x.whyResources(w, j)
	case checkPriority:
		x.whyPriority(w, j)
	case checkNodes:
		if _, nodes, ok := strings.Cut(j.StateDesc, "UnavailableNodes:"); ok && nodes != "" {
			w.Detail = w.Meaning + ": unavailable nodes " + nodes
		}
	case checkDependency:
		if j.Dependency != "" {
			w.Detail = w.Meaning + ": " + j.Dependency
		}
		if j.StateReason == "DependencyNeverSatisfied" {
			w.Hint = fmt.Sprintf("cancel it (scancel %d) and submit it again with a dependency that can be met", j.ID)
		}
	case checkBegin:
		if !j.EligibleTime.IsZero() {
			w.Detail = "it may not start before " + j.EligibleTime.UTC().Format("2006-01-02 15:04:05 UTC")
		}
		if j.RestartCount > 0 {
			w.Detail += fmt.Sprintf(" (it was requeued %d times; a requeued job waits a moment before it may start again)", j.RestartCount)
		}
	case checkHeldUser:
		w.Hint = fmt.Sprintf("scontrol release %d lets it start", j.ID)
	}
	if r.check == checkNone && (j.StateReason == "" || j.StateReason == "None") {
		w.Hint = "ask again after the next scheduling cycle"
	}
	return w
}

// matches reports whether a TRES key is of a family.
func matches(key, family string) bool {
	if family == "gres" {
		return strings.HasPrefix(key, "gres/")
	}
	return key == family
}

// levelKeys are the associations a job must fit under, from its user's
// association up to the tenant.
func (x *index) levelKeys(j slurmrest.Job) []key {
	out := []key{{j.Account, j.User}}
	acct := j.Account
	for range 64 {
		if acct == "" || acct == "root" {
			break
		}
		out = append(out, key{acct, ""})
		acct = x.parent[acct]
	}
	return out
}

// levelName is how an association reads in a sentence.
func (x *index) levelName(k key) string {
	if k.user != "" {
		return "user " + k.user + " in " + k.account
	}
	return x.kind(k.account) + " " + k.account
}

// findLimit returns the reported limit of an association.
func (x *index) findLimit(k key, l lim) Limit {
	for _, got := range x.limits(k.account, k.user) {
		want := l.name()
		if k.user != "" && l == (lim{grpTRES, "gres/gpu"}) {
			want = "gpus_per_user"
		}
		if got.Name == want {
			return got
		}
	}
	return Limit{Name: l.name(), Slurm: l.slurm(), Unit: l.unit()}
}

func (x *index) whyAssocTRES(w *Why, j slurmrest.Job, family string) {
	ask := req(j)
	for _, k := range x.levelKeys(j) {
		a := x.assoc[k]
		if a == nil {
			continue
		}
		use := x.usage(k.account, k.user)
		for _, t := range a.GrpTRES {
			key := t.Key()
			n, _ := ask.Get(key)
			if !matches(key, family) || n == 0 || use.tres[key]+n <= t.Count {
				continue
			}
			l := lim{grpTRES, key}
			b := &Blocker{Level: x.levelName(k), Limit: x.findLimit(k, l), Ask: tresScale(key, n)}
			w.Limit = b
			used, limit := tresScale(key, use.tres[key]), tresScale(key, t.Count)
			unit := sentenceUnit(key)
			switch {
			case n > t.Count:
				w.Detail = fmt.Sprintf("this job asks for %s %s, more than the %s that %s may hold at once: it can never start under this limit",
					num(b.Ask), unit, num(limit), b.Level)
				w.Hint = "ask for less, or have the limit raised" + at(b.Limit.Source)
			case k.user != "":
				w.Detail = fmt.Sprintf("user %s holds %s of the %s %s one user may hold in %s; this job asks for %s",
					k.user, num(used), num(limit), unit, k.account, num(b.Ask))
				w.Hint = fmt.Sprintf("it can start when %s of %s's %s in %s are free (when jobs of %s end), or when the limit is raised%s",
					num(used+b.Ask-limit), k.user, unit, k.account, k.user, at(b.Limit.Source))
			default:
				w.Detail = fmt.Sprintf("%s uses %s of its %s %s; this job asks for %s", b.Level, num(used), num(limit), unit, num(b.Ask))
				w.Hint = fmt.Sprintf("it can start when %s more %s of %s are free (when its running jobs end), or when the limit is raised%s",
					num(used+b.Ask-limit), unit, b.Level, at(b.Limit.Source))
			}
			return
		}
	}
	w.Detail = w.Meaning + ", but the running jobs seen now leave room under every limit on its way up: " +
		"Slurm may not have looked at the job again since jobs ended"
}

func (x *index) whyAssocMins(w *Why, j slurmrest.Job, family string) {
	ask := req(j)
	minutes := int64(j.TimeLimit.Minutes())
	for _, k := range x.levelKeys(j) {
		a := x.assoc[k]
		if a == nil {
			continue
		}
		for _, t := range a.GrpTRESMin {
			key := t.Key()
			if !matches(key, family) {
				continue
			}
			n, _ := ask.Get(key)
			if n == 0 {
				continue
			}
			l := lim{grpMins, key}
			b := &Blocker{Level: x.levelName(k), Limit: x.findLimit(k, l), Ask: l.scale(n * minutes)}
			unit := l.unit()
			s := x.shares[k]
			if s == nil {
				w.Limit = b
				why := x.in.Live.SharesUnavailable
				if why == "" {
					why = "Slurm's fair-share tree has no row for it"
				}
				w.Detail = fmt.Sprintf("%s has a budget of %s %s; how much is used is unavailable (%s)", b.Level, num(l.scale(t.Count)), unit, why)
				return
			}
			usedMin := s.TRESUsage[key] / 60
			runMin := float64(s.TRESRunSecs[key]) / 60
			if usedMin < float64(t.Count) && usedMin+runMin+float64(n*minutes) <= float64(t.Count) {
				continue
			}
			w.Limit = b
			used, run, limit := usedMin/l.minutesPer(), runMin/l.minutesPer(), l.scale(t.Count)
			if usedMin >= float64(t.Count) {
				w.Detail = fmt.Sprintf("%s has used %s of its %s %s", b.Level, num(used), num(limit), unit)
			} else {
				w.Detail = fmt.Sprintf("%s has used %s of its %s %s, its running jobs may use %s more, and this job up to %s (%d %s for %s)",
					b.Level, num(used), num(limit), unit, num(run), num(b.Ask), n, sentenceUnit(key), dur(j.TimeLimit))
			}
			w.Hint = "usage decays over time (PriorityDecayHalfLife) and is reset by PriorityUsageResetPeriod; or have the budget raised" + at(b.Limit.Source)
			return
		}
	}
	w.Detail = w.Meaning + ", but the usage seen now leaves room in every budget on its way up"
}

func (x *index) whyAssocJobs(w *Why, j slurmrest.Job) {
	for _, k := range x.levelKeys(j) {
		a := x.assoc[k]
		if a == nil || a.MaxJobs == nil {
			continue
		}
		use := x.usage(k.account, k.user)
		if int64(use.running)+1 <= *a.MaxJobs {
			continue
		}
		b := &Blocker{Level: x.levelName(k), Limit: x.findLimit(k, lim{grpJobs, ""}), Ask: 1}
		w.Limit = b
		w.Detail = fmt.Sprintf("%s runs %d jobs, and may run %d at once; this job would be one more", b.Level, use.running, *a.MaxJobs)
		w.Hint = "it can start when one of them ends, or when the limit is raised" + at(b.Limit.Source)
		return
	}
	w.Detail = w.Meaning + ", but the running jobs seen now leave room under every job limit on its way up"
}

func (x *index) whyQOSTRES(w *Why, j slurmrest.Job, c check, family string) {
	q := x.qos[j.QOS]
	if q == nil {
		w.Detail = w.Meaning + " (QOS " + j.QOS + " is not in Slurm's list)"
		return
	}
	list, slurmName := q.GrpTRES, "GrpTRES"
	switch c {
	case checkQOSUser:
		list, slurmName = q.MaxTRESPerUser, "MaxTRESPerUser"
	case checkQOSJob:
		list, slurmName = q.MaxTRESPerJob, "MaxTRESPerJob"
	}
	var use usage
	if c != checkQOSJob {
		use = usage{tres: map[string]int64{}}
		for _, o := range x.in.Live.Jobs {
			if o.Running() && o.QOS == j.QOS && (c != checkQOSUser || o.User == j.User) {
				for _, t := range o.TRESAlloc {
					use.tres[t.Key()] += t.Count
				}
			}
		}
	}
	ask := req(j)
	for _, t := range list {
		key := t.Key()
		n, _ := ask.Get(key)
		if !matches(key, family) || n == 0 || use.tres[key]+n <= t.Count {
			continue
		}
		unit := sentenceUnit(key)
		l := Limit{Name: slurmName + " " + key, Slurm: slurmName + " " + key + " (QOS " + j.QOS + ")", Unit: tresUnit(key),
			Live: ptr(tresScale(key, t.Count)), Used: ptr(tresScale(key, use.tres[key]))}
		level := "QOS " + j.QOS
		if cl, ok := x.classes[j.QOS]; ok && c == checkQOSJob && key == "gres/gpu" {
			// The policy's max_gpus_per_job is the class QOS's MaxTRESPerJob.
			level, l.Name = "class "+cl.Name, "max_gpus_per_job"
			if m := cl.MaxGPUsPerJob; m != nil && m.Value > 0 {
				l.Policy = ptr(float64(m.Value))
				l.Source = x.source(m.Source)
				l.Drift = m.Value != t.Count
			}
		}
		b := &Blocker{Level: level, Limit: l, Ask: tresScale(key, n)}
		w.Limit = b
		limit, used := *l.Live, *l.Used
		switch c {
		case checkQOSJob:
			w.Detail = fmt.Sprintf("this job asks for %s %s; %s allows %s per job", num(b.Ask), unit, level, num(limit))
			w.Hint = fmt.Sprintf("it will never start as it is: ask for at most %s %s", num(limit), unit)
		case checkQOSUser:
			w.Detail = fmt.Sprintf("user %s holds %s %s in QOS %s, which allows %s per user; this job asks for %s",
				j.User, num(used), unit, j.QOS, num(limit), num(b.Ask))
			w.Hint = fmt.Sprintf("it can start when %s of %s's %s in QOS %s are free", num(used+b.Ask-limit), j.User, unit, j.QOS)
		default:
			w.Detail = fmt.Sprintf("QOS %s uses %s of its %s %s; this job asks for %s", j.QOS, num(used), num(limit), unit, num(b.Ask))
			w.Hint = fmt.Sprintf("it can start when %s more %s of QOS %s are free", num(used+b.Ask-limit), unit, j.QOS)
		}
		if n > t.Count && c != checkQOSJob {
			w.Detail = fmt.Sprintf("this job asks for %s %s, more than the %s that %s allows: it can never start under this limit",
				num(b.Ask), unit, num(limit), level)
			w.Hint = "ask for less"
		}
		return
	}
	w.Detail = w.Meaning + ", but the running jobs seen now leave room under QOS " + j.QOS + "'s limits"
}

func (x *index) whyQOSWall(w *Why, j slurmrest.Job) {
	q := x.qos[j.QOS]
	if q == nil || q.MaxWall == 0 {
		return
	}
	l := Limit{Name: "MaxWall", Slurm: "MaxWall (QOS " + j.QOS + ")", Unit: "minutes", Live: ptr(q.MaxWall.Minutes())}
	level := "QOS " + j.QOS
	if c, ok := x.classes[j.QOS]; ok {
		level, l.Name = "class "+c.Name, "max_time"
		if m := c.MaxTime; m != nil && m.Value.Std() > 0 {
			l.Policy = ptr(m.Value.Std().Minutes())
			l.Source = x.source(m.Source)
			l.Drift = m.Value.Std() != q.MaxWall
		}
	}
	w.Limit = &Blocker{Level: level, Limit: l, Ask: j.TimeLimit.Minutes()}
	w.Detail = fmt.Sprintf("its time limit of %s is longer than the %s that %s allows", dur(j.TimeLimit), dur(q.MaxWall), level)
	w.Hint = fmt.Sprintf("it will never start as it is: ask for at most %s (scontrol update jobid=%d timelimit=...)", dur(q.MaxWall), j.ID)
}

func (x *index) whyPartTime(w *Why, j slurmrest.Job) {
	i := slices.IndexFunc(x.in.Live.Partitions, func(p slurmrest.Partition) bool { return p.Name == j.Partition })
	if i < 0 || x.in.Live.Partitions[i].MaxTime == 0 {
		return
	}
	maxTime := x.in.Live.Partitions[i].MaxTime
	w.Limit = &Blocker{Level: "partition " + j.Partition, Ask: j.TimeLimit.Minutes(),
		Limit: Limit{Name: "MaxTime", Slurm: "MaxTime (partition " + j.Partition + ")", Unit: "minutes", Live: ptr(maxTime.Minutes())}}
	w.Detail = fmt.Sprintf("its time limit of %s is longer than the %s that partition %s allows", dur(j.TimeLimit), dur(maxTime), j.Partition)
	w.Hint = fmt.Sprintf("ask for at most %s (scontrol update jobid=%d timelimit=...)", dur(maxTime), j.ID)
}

func (x *index) whyResources(w *Why, j slurmrest.Job) {
	var total, free, cpus, freeCPUs int
	for _, n := range x.in.Live.Nodes {
		if !slices.Contains(n.Partitions, j.Partition) {
			continue
		}
		total, cpus = total+n.GPUs, cpus+n.CPUs
		if usable(n) {
			free, freeCPUs = free+n.GPUs-n.GPUsUsed, freeCPUs+n.CPUs-n.AllocCPUs
		}
	}
	a := askOf(j)
	switch {
	case a.GPUs > 0 && total > 0:
		w.Detail = fmt.Sprintf("it asks for %d GPUs on %s; %d of the %d GPUs of partition %s are free now",
			a.GPUs, plural(a.Nodes, "node"), free, total, j.Partition)
	case cpus > 0:
		w.Detail = fmt.Sprintf("it asks for %d CPUs on %s; %d of the %d CPUs of partition %s are free now",
			a.CPUs, plural(a.Nodes, "node"), freeCPUs, cpus, j.Partition)
	}
	w.Hint = "it starts when running jobs end and it is first in line; a smaller job that fits in a gap may start before it (backfill)"
}

// usable reports whether a node can take jobs.
func usable(n slurmrest.Node) bool {
	for _, s := range n.State {
		switch strings.ToUpper(s) {
		case "DOWN", "DRAIN", "DRAINED", "DRAINING", "FAIL", "FAILING", "NOT_RESPONDING", "MAINTENANCE",
			"POWERED_DOWN", "POWER_DOWN", "FUTURE", "RESERVED", "INVALID":
			return false
		}
	}
	return true
}

func (x *index) whyPriority(w *Why, j slurmrest.Job) {
	s := x.shares[key{j.Account, j.User}]
	if s == nil {
		return
	}
	if factorNotComputed(s) {
		w.Detail = fmt.Sprintf("%s in partition %s; the fair-share factor of user %s in %s is not computed yet",
			w.Meaning, j.Partition, j.User, j.Account)
		w.Hint = "slurmctld computes fair-share factors every PriorityCalcPeriod (5 minutes by default); until then a new association's factor counts as 0"
		return
	}
	w.Detail = fmt.Sprintf("%s in partition %s; the fair-share factor of user %s in %s is %s",
		w.Meaning, j.Partition, j.User, j.Account, strconv.FormatFloat(s.FairShareFactor, 'f', 3, 64))
	w.Hint = "the factor rises as past usage of the user and the accounts above decays (see the fair-share table)"
}

// num prints a count: whole numbers without decimals, others with one.
func num(v float64) string {
	if v == math.Trunc(v) {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// sentenceUnit is a TRES unit as it reads in a sentence.
func sentenceUnit(key string) string {
	if key == "mem" {
		return "GiB of memory"
	}
	return tresUnit(key)
}

// at is " (policy.yaml:57)" for a source, "" for none.
func at(s *Source) string {
	if s == nil {
		return ""
	}
	return " (" + s.String() + ")"
}

// dur prints a time limit the way the policy file writes them.
func dur(d time.Duration) string {
	switch {
	case d == 0:
		return "none"
	case d%(24*time.Hour) == 0:
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	}
	return fmt.Sprintf("%dm", d/time.Minute)
}

func minutes(n int64) time.Duration { return time.Duration(n) * time.Minute }

// plural is "1 node", "2 nodes".
func plural(n int64, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
