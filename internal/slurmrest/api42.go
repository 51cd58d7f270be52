package slurmrest

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/strata-hpc/strata/internal/hostlist"

	gen "github.com/strata-hpc/strata/internal/slurmrest/v0042"
)

// api42 adapts data parser v0.0.42 (Slurm 24.11 through 26.05).
type api42 struct {
	c   *Client
	gen *gen.ClientWithResponses
}

func newAPI42(c *Client) (backend, error) {
	g, err := gen.NewClientWithResponses(c.cfg.URL, gen.WithHTTPClient(c.cfg.HTTPClient), gen.WithRequestEditorFn(c.editor))
	if err != nil {
		return nil, fmt.Errorf("slurmrest: v0.0.42 client: %w", err)
	}
	return &api42{c: c, gen: g}, nil
}

func (a *api42) user(ctx context.Context) string { u, _ := ctx.Value(userKey{}).(string); return u }

func (a *api42) ping(ctx context.Context) ([]Ping, error) {
	r, err := a.gen.SlurmV0042GetPingWithResponse(ctx)
	if err != nil {
		return nil, fmt.Errorf("ping: %w", err)
	}
	ok, err := result("ping", a.user(ctx), r.StatusCode(), r.Body, r.JSON200)
	if err != nil {
		return nil, err
	}
	out := make([]Ping, 0, len(ok.Pings))
	for _, p := range ok.Pings {
		out = append(out, Ping{Hostname: deref(p.Hostname), Responding: p.Responding, Primary: p.Primary,
			Latency: time.Duration(deref(p.Latency)) * time.Microsecond, Status: deref(p.Pinged)})
	}
	return out, nil
}

func (a *api42) jobs(ctx context.Context, since time.Time) (JobList, error) {
	p := &gen.SlurmV0042GetJobsParams{}
	if !since.IsZero() {
		p.UpdateTime = ptr(strconv.FormatInt(since.Unix(), 10))
	}
	r, err := a.gen.SlurmV0042GetJobsWithResponse(ctx, p)
	if err != nil {
		return JobList{}, fmt.Errorf("list jobs: %w", err)
	}
	ok, err := result("list jobs", a.user(ctx), r.StatusCode(), r.Body, r.JSON200)
	if err != nil {
		return JobList{}, err
	}
	return jobList(since, noValTime(&ok.LastUpdate), ok.Jobs, job42)
}

func (a *api42) job(ctx context.Context, id int64) (Job, error) {
	op := fmt.Sprintf("get job %d", id)
	r, err := a.gen.SlurmV0042GetJobWithResponse(ctx, strconv.FormatInt(id, 10), nil)
	if err != nil {
		return Job{}, fmt.Errorf("%s: %w", op, err)
	}
	ok, err := result(op, a.user(ctx), r.StatusCode(), r.Body, r.JSON200)
	if err != nil {
		return Job{}, err
	}
	return oneJob(op, ok.Jobs, job42)
}

func job42(j gen.V0042JobInfo) (Job, error) {
	out := Job{
		ID: deref(j.JobId), Name: deref(j.Name), User: deref(j.UserName), UserID: deref(j.UserId),
		Account: deref(j.Account), Partition: deref(j.Partition), QOS: deref(j.Qos),
		State: JobState(derefSlice(j.JobState)), StateReason: unset(j.StateReason),
		NodeList: unset(j.Nodes), TRESPerNode: deref(j.TresPerNode),
		Comment: deref(j.Comment), AdminComment: deref(j.AdminComment), Requeue: deref(j.Requeue),
		RestartCount: int(deref(j.RestartCnt)), Held: deref(j.Hold), TimeLimit: noValMinutes(j.TimeLimit),
		SubmitTime: noValTime(j.SubmitTime), EligibleTime: noValTime(j.EligibleTime),
		StartTime: noValTime(j.StartTime), EndTime: noValTime(j.EndTime),
		WorkDir: deref(j.CurrentWorkingDirectory), StdOut: deref(j.StandardOutput), BatchHost: deref(j.BatchHost),
	}
	if j.ExitCode != nil {
		out.ExitCode = int(deref(noValPtr(j.ExitCode.ReturnCode)))
	}
	out.StateDesc, out.Dependency = deref(j.StateDescription), deref(j.Dependency)
	return finishJob(out, deref(j.TresAllocStr), deref(j.TresReqStr), derefSlice(j.GresDetail))
}

func (a *api42) submit(ctx context.Context, s JobSpec) (SubmitResult, error) {
	d := gen.V0042JobDescMsg{
		Name: nonEmpty(s.Name), Account: nonEmpty(s.Account), Partition: nonEmpty(s.Partition), Qos: nonEmpty(s.QOS),
		TresPerNode: nonEmpty(s.TRESPerNode), Nodes: nonEmpty(s.Nodes), CurrentWorkingDirectory: nonEmpty(s.WorkDir),
		StandardOutput: nonEmpty(s.StdOut), StandardError: nonEmpty(s.StdErr), Comment: nonEmpty(s.Comment),
		Requeue: s.Requeue, Environment: ptr(environment(s.Environment)),
	}
	if s.Tasks > 0 {
		d.Tasks = ptr(int64(s.Tasks))
	}
	if s.NodeList != "" {
		nodes, err := hostlist.Expand(s.NodeList)
		if err != nil {
			return SubmitResult{}, fmt.Errorf("submit job: node list: %w", err)
		}
		d.RequiredNodes = &nodes
	}
	if s.CPUsPerTask > 0 {
		d.CpusPerTask = ptr(int64(s.CPUsPerTask))
	}
	if s.TimeLimit > 0 {
		d.TimeLimit = setNoVal[gen.V0042Uint32NoValStruct](minutesUp(s.TimeLimit))
	}
	if s.Hold {
		d.Hold = ptr(true)
	}
	if s.Exclusive {
		d.Shared = &gen.V0042JobShared{"none"}
	}
	r, err := a.gen.SlurmV0042PostJobSubmitWithResponse(ctx, gen.V0042JobSubmitReq{Script: ptr(s.Script), Job: &d})
	if err != nil {
		return SubmitResult{}, fmt.Errorf("submit job: %w", err)
	}
	ok, err := result("submit job", a.user(ctx), r.StatusCode(), r.Body, r.JSON200)
	if err != nil {
		return SubmitResult{}, err
	}
	return SubmitResult{JobID: deref(ok.JobId), StepID: deref(ok.StepId), UserMessage: deref(ok.JobSubmitUserMsg),
		Warnings: warnings(r.Body)}, nil
}

func (a *api42) update(ctx context.Context, id int64, u JobUpdate) error {
	d := gen.V0042JobDescMsg{Comment: u.Comment, AdminComment: u.AdminComment, Requeue: u.Requeue, Hold: u.Hold}
	if u.TimeLimit != nil {
		d.TimeLimit = setNoVal[gen.V0042Uint32NoValStruct](minutesUp(*u.TimeLimit))
	}
	if u.BeginTime != nil {
		d.BeginTime = setNoVal[gen.V0042Uint64NoValStruct](u.BeginTime.Unix())
	}
	op := fmt.Sprintf("update job %d", id)
	r, err := a.gen.SlurmV0042PostJobWithResponse(ctx, strconv.FormatInt(id, 10), d)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return checkResponse(op, a.user(ctx), r.StatusCode(), r.Body)
}

func (a *api42) signal(ctx context.Context, id int64, sig string, batchOnly bool) error {
	p := &gen.SlurmV0042DeleteJobParams{Signal: &sig}
	if batchOnly {
		p.Flags = ptr(gen.SlurmV0042DeleteJobParamsFlags("BATCH_JOB"))
	}
	return a.deleteJob(ctx, fmt.Sprintf("signal job %d with %s", id, sig), id, p)
}

func (a *api42) cancel(ctx context.Context, id int64) error {
	return a.deleteJob(ctx, fmt.Sprintf("cancel job %d", id), id, nil)
}

func (a *api42) deleteJob(ctx context.Context, op string, id int64, p *gen.SlurmV0042DeleteJobParams) error {
	r, err := a.gen.SlurmV0042DeleteJobWithResponse(ctx, strconv.FormatInt(id, 10), p)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return checkResponse(op, a.user(ctx), r.StatusCode(), r.Body)
}

func (a *api42) requeue(context.Context, int64, bool) error { return ErrUnsupported }

func (a *api42) nodes(ctx context.Context) ([]Node, error) {
	r, err := a.gen.SlurmV0042GetNodesWithResponse(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	ok, err := result("list nodes", a.user(ctx), r.StatusCode(), r.Body, r.JSON200)
	if err != nil {
		return nil, err
	}
	out := make([]Node, 0, len(ok.Nodes))
	for _, n := range ok.Nodes {
		out = append(out, finishNode(Node{
			Name: deref(n.Name), State: derefSlice(n.State), Reason: deref(n.Reason), Partitions: derefSlice(n.Partitions),
			CPUs: int(deref(n.Cpus)), AllocCPUs: int(deref(n.AllocCpus)), RealMemory: deref(n.RealMemory),
			Sockets: int(deref(n.Sockets)), Cores: int(deref(n.Cores)), Threads: int(deref(n.Threads)),
			GRES: deref(n.Gres), GRESUsed: deref(n.GresUsed), Address: deref(n.Address), Port: int(deref(n.Port)),
		}))
	}
	return out, nil
}

func (a *api42) partitions(ctx context.Context) ([]Partition, error) {
	r, err := a.gen.SlurmV0042GetPartitionsWithResponse(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("list partitions: %w", err)
	}
	ok, err := result("list partitions", a.user(ctx), r.StatusCode(), r.Body, r.JSON200)
	if err != nil {
		return nil, err
	}
	out := make([]Partition, 0, len(ok.Partitions))
	for _, p := range ok.Partitions {
		x := Partition{Name: deref(p.Name)}
		if p.Nodes != nil {
			x.Nodes, x.TotalNodes = deref(p.Nodes.Configured), int(deref(p.Nodes.Total))
		}
		if p.Cpus != nil {
			x.TotalCPUs = int(deref(p.Cpus.Total))
		}
		if p.Partition != nil {
			x.State = derefSlice(p.Partition.State)
		}
		if p.Maximums != nil {
			x.MaxTime = noValMinutes(p.Maximums.Time)
		}
		if p.Qos != nil {
			x.QOS = unset(p.Qos.Assigned)
		}
		if p.Accounts != nil {
			x.Accounts = unset(p.Accounts.Allowed)
		}
		out = append(out, x)
	}
	return out, nil
}

func (a *api42) shares(ctx context.Context) ([]Share, error) {
	r, err := a.gen.SlurmV0042GetSharesWithResponse(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("get shares: %w", err)
	}
	ok, err := result("get shares", a.user(ctx), r.StatusCode(), r.Body, r.JSON200)
	if err != nil {
		return nil, err
	}
	var out []Share
	for _, s := range derefSlice(ok.Shares.Shares) {
		x := Share{Parent: deref(s.Parent), Shares: noVal(s.Shares).Number, RawUsage: deref(s.Usage)}
		x.SharesNorm, _ = noValF(s.SharesNormalized)
		x.EffectiveUsage, _ = noValF(s.EffectiveUsage)
		if s.Fairshare != nil {
			x.FairShareFactor, _ = noValF(s.Fairshare.Factor)
			x.LevelFS, _ = noValF(s.Fairshare.Level)
		}
		if s.Tres != nil {
			for _, u := range derefSlice(s.Tres.Usage) {
				x.TRESUsage = shareTRES(x.TRESUsage, deref(u.Name), float64(deref(u.Value)))
			}
			for _, r := range derefSlice(s.Tres.RunSeconds) {
				if n, ok := noVal(r.Value).Value(); ok {
					x.TRESRunSecs = shareTRES(x.TRESRunSecs, deref(r.Name), n)
				}
			}
		}
		out = append(out, shareRow(x, deref(s.Name), derefSlice(s.Type)))
	}
	return out, nil
}

func (a *api42) accounts(ctx context.Context, withCoordinators bool) ([]Account, error) {
	var p *gen.SlurmdbV0042GetAccountsParams
	if withCoordinators {
		p = &gen.SlurmdbV0042GetAccountsParams{WithCoordinators: ptr("true")} // an empty value lists none
	}
	r, err := a.gen.SlurmdbV0042GetAccountsWithResponse(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("list accounts: %w", err)
	}
	ok, err := result("list accounts", a.user(ctx), r.StatusCode(), r.Body, r.JSON200)
	if err != nil {
		return nil, err
	}
	out := make([]Account, 0, len(ok.Accounts))
	for _, x := range ok.Accounts {
		acc := Account{Name: x.Name, Description: x.Description, Organization: x.Organization}
		for _, c := range derefSlice(x.Coordinators) {
			if deref(c.Direct) { // inherited ones are listed under the parent account
				acc.Coordinators = append(acc.Coordinators, c.Name)
			}
		}
		out = append(out, acc)
	}
	return out, nil
}

func (a *api42) createAccount(ctx context.Context, cluster string, s AccountSpec) error {
	set := &gen.V0042AssocRecSet{Parent: nonEmpty(s.Parent), Defaultqos: nonEmpty(s.DefaultQOS)}
	if s.Fairshare > 0 {
		set.Fairshare = &s.Fairshare
	}
	if len(s.QOS) > 0 {
		set.Qoslevel = &s.QOS
	}
	if len(s.GrpTRES) > 0 {
		set.Grptres = tresWireList[gen.V0042Tres](s.GrpTRES)
	}
	body := gen.V0042OpenapiAccountsAddCondResp{
		AssociationCondition: &gen.V0042AccountsAddCond{Accounts: []string{s.Name}, Clusters: &[]string{cluster}, Association: set},
		Account:              &gen.V0042AccountShort{Description: nonEmpty(s.Description), Organization: nonEmpty(s.Organization)},
	}
	op := "create account " + s.Name
	r, err := a.gen.SlurmdbV0042PostAccountsAssociationWithResponse(ctx, body)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return created(op, a.user(ctx), r.StatusCode(), r.Body)
}

// setAccounts creates or updates account records (POST /accounts), with no
// association; see Client.SetAccounts.
func (a *api42) setAccounts(ctx context.Context, in []AccountSpec) error {
	list := make([]gen.V0042Account, 0, len(in))
	for _, s := range in {
		list = append(list, gen.V0042Account{Name: s.Name, Description: s.Description, Organization: s.Organization})
	}
	op := listOp("set account", in, func(s AccountSpec) string { return s.Name })
	r, err := a.gen.SlurmdbV0042PostAccountsWithResponse(ctx, gen.V0042OpenapiAccountsResp{Accounts: list})
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return checkResponse(op, a.user(ctx), r.StatusCode(), r.Body)
}

// addAccountAssociations gives accounts their association under parent
// (POST /accounts_association); slurmdbd answers 304 when all of them
// have one.
func (a *api42) addAccountAssociations(ctx context.Context, cluster, parent string, accounts []string) error {
	body := gen.V0042OpenapiAccountsAddCondResp{AssociationCondition: &gen.V0042AccountsAddCond{Accounts: accounts, Clusters: &[]string{cluster}, Association: &gen.V0042AssocRecSet{Parent: nonEmpty(parent)}}}
	op := listOp("add the association under "+orRoot(parent)+" of account", accounts, func(n string) string { return n })
	r, err := a.gen.SlurmdbV0042PostAccountsAssociationWithResponse(ctx, body)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return created(op, a.user(ctx), r.StatusCode(), r.Body)
}

func (a *api42) deleteAccount(ctx context.Context, name string) error {
	op := "delete account " + name
	r, err := a.gen.SlurmdbV0042DeleteAccountWithResponse(ctx, name)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return checkResponse(op, a.user(ctx), r.StatusCode(), r.Body)
}

func (a *api42) associations(ctx context.Context, f AssociationFilter) ([]Association, error) {
	p := &gen.SlurmdbV0042GetAssociationsParams{Account: nonEmpty(f.account()), User: nonEmpty(f.User)}
	r, err := a.gen.SlurmdbV0042GetAssociationsWithResponse(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("list associations: %w", err)
	}
	ok, err := result("list associations", a.user(ctx), r.StatusCode(), r.Body, r.JSON200)
	if err != nil {
		return nil, err
	}
	out := make([]Association, 0, len(ok.Associations))
	for _, x := range ok.Associations {
		as := Association{Cluster: deref(x.Cluster), Account: deref(x.Account), User: x.User, Partition: deref(x.Partition),
			Parent: deref(x.ParentAccount), Fairshare: deref(x.SharesRaw), Priority: noValPtr(x.Priority), IsDefault: deref(x.IsDefault)}
		if x.Default != nil {
			as.DefaultQOS = deref(x.Default.Qos)
		}
		as.QOS = derefSlice(x.Qos)
		if m := x.Max; m != nil {
			if m.Tres != nil {
				as.GrpTRES = tresList(m.Tres.Total)
				if m.Tres.Per != nil {
					as.MaxTRESJob = tresList(m.Tres.Per.Job)
				}
				if m.Tres.Group != nil {
					as.GrpTRESMin = tresList(m.Tres.Group.Minutes)
				}
			}
			if m.Jobs != nil && m.Jobs.Per != nil {
				as.MaxJobs = noValPtr(m.Jobs.Per.Count)
			}
		}
		out = append(out, as)
	}
	return out, nil
}

func (a *api42) setAssociations(ctx context.Context, in []Association) error {
	list := make([]gen.V0042Assoc, 0, len(in))
	for _, x := range in {
		as := gen.V0042Assoc{Account: ptr(x.Account), Cluster: ptr(x.Cluster), User: x.User, Partition: nonEmpty(x.Partition)}
		if x.Fairshare > 0 {
			as.SharesRaw = ptr(x.Fairshare)
		}
		if x.Parent != "" {
			as.ParentAccount = ptr(x.Parent)
		}
		if len(x.QOS) > 0 {
			as.Qos = &x.QOS
		}
		if x.DefaultQOS != "" {
			as.Default = &struct {
				Qos *string `json:"qos,omitempty"`
			}{Qos: ptr(x.DefaultQOS)}
		}
		if x.Priority != nil {
			as.Priority = setNoVal[gen.V0042Uint32NoValStruct](*x.Priority)
		}
		if x.IsDefault {
			as.IsDefault = ptr(true)
		}
		if raw := assocMaxJSON(x); raw != "" {
			if err := jsonInto(raw, &as.Max); err != nil {
				return err
			}
		}
		list = append(list, as)
	}
	op := fmt.Sprintf("set %d associations", len(in))
	r, err := a.gen.SlurmdbV0042PostAssociationsWithResponse(ctx, gen.V0042OpenapiAssocsResp{Associations: list})
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return checkResponse(op, a.user(ctx), r.StatusCode(), r.Body)
}

func (a *api42) deleteAssociation(ctx context.Context, cluster, account, user string) error {
	op := fmt.Sprintf("delete association %s/%s", account, user)
	p := &gen.SlurmdbV0042DeleteAssociationParams{Cluster: ptr(cluster), Account: ptr(account)}
	if user != "" {
		p.User = ptr(user)
	}
	r, err := a.gen.SlurmdbV0042DeleteAssociationWithResponse(ctx, p)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return checkResponse(op, a.user(ctx), r.StatusCode(), r.Body)
}

func (a *api42) users(ctx context.Context) ([]User, error) {
	r, err := a.gen.SlurmdbV0042GetUsersWithResponse(ctx, &gen.SlurmdbV0042GetUsersParams{WithAssocs: ptr("true")})
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	ok, err := result("list users", a.user(ctx), r.StatusCode(), r.Body, r.JSON200)
	if err != nil {
		return nil, err
	}
	out := make([]User, 0, len(ok.Users))
	for _, u := range ok.Users {
		x := User{Name: u.Name}
		if u.Default != nil {
			x.DefaultAccount = deref(u.Default.Account)
		}
		if lv := derefSlice(u.AdministratorLevel); len(lv) > 0 {
			x.AdminLevel = lv[0]
		}
		for _, as := range derefSlice(u.Associations) {
			x.Accounts = append(x.Accounts, deref(as.Account))
		}
		out = append(out, x)
	}
	return out, nil
}

func (a *api42) addUser(ctx context.Context, cluster string, u UserSpec) error {
	cond := gen.V0042UsersAddCond{Users: []string{u.Name}, Accounts: &u.Accounts, Clusters: &[]string{cluster}}
	if u.Fairshare > 0 {
		cond.Association = &gen.V0042AssocRecSet{Fairshare: &u.Fairshare}
	}
	body := gen.V0042OpenapiUsersAddCondResp{AssociationCondition: cond, User: gen.V0042UserShort{Defaultaccount: nonEmpty(u.DefaultAccount)}}
	op := "add user " + u.Name
	r, err := a.gen.SlurmdbV0042PostUsersAssociationWithResponse(ctx, nil, body)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return created(op, a.user(ctx), r.StatusCode(), r.Body)
}

func (a *api42) setDefaultAccount(ctx context.Context, user, account string) error {
	return a.setDefaultAccounts(ctx, []User{{Name: user, DefaultAccount: account}})
}

func (a *api42) setDefaultAccounts(ctx context.Context, in []User) error {
	list := make([]gen.V0042User, 0, len(in))
	for _, x := range in {
		u := gen.V0042User{Name: x.Name}
		if err := jsonInto(fmt.Sprintf(`{"account":%s}`, mustJSON(x.DefaultAccount)), &u.Default); err != nil {
			return err
		}
		list = append(list, u)
	}
	op := listOp("set default account of", in, func(u User) string { return u.Name + " to " + u.DefaultAccount })
	r, err := a.gen.SlurmdbV0042PostUsersWithResponse(ctx, gen.V0042OpenapiUsersResp{Users: list})
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return checkResponse(op, a.user(ctx), r.StatusCode(), r.Body)
}

// addUsers creates user records only (POST /users); see Client.AddUsers.
func (a *api42) addUsers(ctx context.Context, names []string) error {
	list := make([]gen.V0042User, 0, len(names))
	for _, n := range names {
		list = append(list, gen.V0042User{Name: n})
	}
	op := listOp("add user", names, func(n string) string { return n })
	r, err := a.gen.SlurmdbV0042PostUsersWithResponse(ctx, gen.V0042OpenapiUsersResp{Users: list})
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return checkResponse(op, a.user(ctx), r.StatusCode(), r.Body)
}

func (a *api42) deleteUser(ctx context.Context, name string) error {
	op := "delete user " + name
	r, err := a.gen.SlurmdbV0042DeleteUserWithResponse(ctx, name)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return checkResponse(op, a.user(ctx), r.StatusCode(), r.Body)
}

func (a *api42) qos(ctx context.Context) ([]QOS, error) {
	r, err := a.gen.SlurmdbV0042GetQosWithResponse(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("list QOS: %w", err)
	}
	ok, err := result("list QOS", a.user(ctx), r.StatusCode(), r.Body, r.JSON200)
	if err != nil {
		return nil, err
	}
	out := make([]QOS, 0, len(ok.Qos))
	for _, q := range ok.Qos {
		x := QOS{Name: deref(q.Name), Description: deref(q.Description), Priority: noValPtr(q.Priority), Flags: derefSlice(q.Flags)}
		if q.Preempt != nil {
			x.Preempt = derefSlice(q.Preempt.List)
			x.PreemptMode = derefSlice(q.Preempt.Mode)
		}
		if l := q.Limits; l != nil && l.Max != nil {
			if t := l.Max.Tres; t != nil {
				x.GrpTRES = tresList(t.Total)
				if t.Per != nil {
					x.MaxTRESPerUser, x.MaxTRESPerJob = tresList(t.Per.User), tresList(t.Per.Job)
				}
			}
			if w := l.Max.WallClock; w != nil && w.Per != nil {
				x.MaxWall = noValMinutes(w.Per.Job)
			}
		}
		out = append(out, x)
	}
	return out, nil
}

func (a *api42) setQOS(ctx context.Context, q QOS) error { return a.setQOSList(ctx, []QOS{q}) }

func (a *api42) setQOSList(ctx context.Context, in []QOS) error {
	list := make([]gen.V0042Qos, 0, len(in))
	for _, q := range in {
		x, err := qos42(q)
		if err != nil {
			return err
		}
		list = append(list, x)
	}
	op := listOp("set QOS", in, func(q QOS) string { return q.Name })
	r, err := a.gen.SlurmdbV0042PostQosWithResponse(ctx, nil, gen.V0042OpenapiSlurmdbdQosResp{Qos: list})
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return checkResponse(op, a.user(ctx), r.StatusCode(), r.Body)
}

// qos42 is one QOS as POST /qos takes it.
func qos42(q QOS) (gen.V0042Qos, error) {
	x := gen.V0042Qos{Name: ptr(q.Name), Description: nonEmpty(q.Description)}
	if q.Priority != nil {
		x.Priority = setNoVal[gen.V0042Uint32NoValStruct](*q.Priority)
	}
	if len(q.Flags) > 0 {
		x.Flags = &q.Flags
	}
	wall := "null"
	if q.MaxWall > 0 {
		wall = fmt.Sprintf(`{"per":{"job":{"set":true,"number":%d}}}`, minutesUp(q.MaxWall))
	}
	raw := fmt.Sprintf(`{"max":{"tres":{"total":%s,"per":{"user":%s,"job":%s}},"wall_clock":%s}}`,
		tresJSON(q.GrpTRES), tresJSON(q.MaxTRESPerUser), tresJSON(q.MaxTRESPerJob), wall)
	if err := jsonInto(raw, &x.Limits); err != nil {
		return x, err
	}
	pre, err := preemptJSON(q.Preempt, q.PreemptMode)
	if err != nil {
		return x, fmt.Errorf("QOS %s: %w", q.Name, err)
	}
	if pre != "" {
		if err := jsonInto(pre, &x.Preempt); err != nil {
			return x, err
		}
	}
	return x, nil
}

func (a *api42) deleteQOS(ctx context.Context, name string) error {
	op := "delete QOS " + name
	r, err := a.gen.SlurmdbV0042DeleteSingleQosWithResponse(ctx, name)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return checkResponse(op, a.user(ctx), r.StatusCode(), r.Body)
}
