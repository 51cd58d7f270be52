package dashboards

// Boards are every dashboard, the operator overview first. The scrape jobs
// are named as in etc/README.md: strata-reclaimd, strata-reclaimd-agent,
// strata-bridge, strata-portal-api, slurmctld (its /metrics/* endpoints)
// and dcgm-exporter.
func Boards() []Board {
	return []Board{overview(), topogen(), policy(), reclaimd(), bridge(), portal()}
}

// onJob joins a dcgm-exporter series of a job's GPU (its hpc_job label,
// from the job mapping files) to reclaimd's series of the running job,
// for its tenant and account. It follows a vector expression.
const onJob = `* on (hpc_job) group_left (tenant, account) strata_reclaim_job_info`

// jobJoin says, in a panel's description, where the job and its tenant
// come from.
const jobJoin = "dcgm-exporter's GPU metrics carry the job (hpc_job: run it with --hpc-job-mapping-dir and slurm-plugins' prolog and epilog); reclaimd's strata_reclaim_job_info gives its tenant."

func overview() Board {
	return Board{File: "strata-overview.json", UID: "strata-overview", Title: "Strata: operator overview",
		Description: "GPU use, the queue, reclaim, failures and retries, drained nodes and serving replicas on one screen.",
		Rows: []Row{
			{Title: "GPUs", Panels: []Panel{
				{Title: "GPUs total", Kind: Stat, Description: "GPUs Slurm has in each partition (slurmctld's OpenMetrics).",
					Queries: []Query{{`sum by (partition) (slurm_partition_gpus)`, "{{partition}}"}}},
				{Title: "GPUs allocated", Kind: Stat, Description: "GPUs held by jobs in each partition (slurmctld's OpenMetrics).",
					Queries: []Query{{`sum by (partition) (slurm_partition_jobs_gpus_alloc)`, "{{partition}}"}}},
				{Title: "GPUs in use", Kind: Stat, Description: "GPUs whose latest sample shows a kernel running more than 10% of the time (reclaimd agents; dcgm-exporter where it runs instead).",
					Queries: []Query{
						{`count(strata_reclaim_agent_gpu_utilization_ratio > 0.1) or vector(0)`, "agents"},
						{`count(max by (instance, gpu) (DCGM_FI_DEV_GPU_UTIL) > 10)`, "dcgm-exporter"},
					}},
				{Title: "Allocated but idle GPUs", Kind: Stat, Description: "GPUs of jobs reclaimd judges idle, on average over the last 5 minutes.",
					Queries: []Query{{`sum(rate(strata_reclaim_idle_gpu_seconds_total[5m])) or vector(0)`, "idle"}}},
				{Title: "GPUs allocated by partition and tenant", Stacked: true, Description: "GPUs held by running jobs, as reclaimd's last cycle saw them.",
					Queries: []Query{{`sum by (partition, tenant) (strata_reclaim_allocated_gpus)`, "{{partition}} {{tenant}}"}}},
				{Title: "GPUs allocated and in use", Description: "Allocated (Slurm) against busy (agents) and idle-but-allocated (reclaimd).",
					Queries: []Query{
						{`sum(slurm_partition_jobs_gpus_alloc)`, "allocated"},
						{`count(strata_reclaim_agent_gpu_utilization_ratio > 0.1) or vector(0)`, "in use"},
						{`sum(rate(strata_reclaim_idle_gpu_seconds_total[$__rate_interval]))`, "idle but allocated"},
					}},
				{Title: "Idle but allocated GPUs by tenant", Stacked: true, Description: "GPU time seen idle in jobs reclaimd judged idle, as GPUs on average.",
					Queries: []Query{{`sum by (tenant) (rate(strata_reclaim_idle_gpu_seconds_total[$__rate_interval]))`, "{{tenant}}"}}},
				{Title: "GPUs allocated by account", Stacked: true, Description: "slurmctld's own view of GPUs held per Slurm account.",
					Queries: []Query{{`sum by (account) (slurm_account_jobs_gpus_alloc)`, "{{account}}"}}},
			}},
			{Title: "GPU use by tenant and job (dcgm-exporter)", Panels: []Panel{
				{Title: "Top idle jobs", Kind: Stat, Description: "Running jobs holding the most idle GPU time over the last 30 minutes: the sum over a job's GPUs of the share of time each was not busy (8: eight GPUs' worth idle). " + jobJoin,
					Queries: []Query{{`topk(10, sum by (hpc_job, tenant, account) ((1 - avg_over_time(DCGM_FI_DEV_GPU_UTIL{hpc_job!=""}[30m]) / 100) ` + onJob + `))`, "{{hpc_job}} {{tenant}} ({{account}})"}}},
				{Title: "Idle GPUs of running jobs by tenant", Kind: Stat, Description: "GPUs held by running jobs and busy less than 10% of the time now, whatever the reclaim rules say. " + jobJoin,
					Queries: []Query{{`sum by (tenant) ((max by (hpc_job, instance, gpu) (DCGM_FI_DEV_GPU_UTIL{hpc_job!=""}) < bool 10) ` + onJob + `)`, "{{tenant}}"}}},
				{Title: "GPU utilisation by tenant", Unit: "percentunit", Description: "Mean utilisation of the GPUs of each tenant's running jobs, and the share of time their graphics engines were active (DCGM's profiling field, where the GPU has it). " + jobJoin,
					Queries: []Query{
						{`avg by (tenant) (DCGM_FI_DEV_GPU_UTIL{hpc_job!=""} / 100 ` + onJob + `)`, "{{tenant}}"},
						{`avg by (tenant) (DCGM_FI_PROF_GR_ENGINE_ACTIVE{hpc_job!=""} ` + onJob + `)`, "{{tenant}} engine active"},
					}},
				{Title: "GPU memory used by tenant", Unit: "bytes", Stacked: true, Description: "Device memory in use on the GPUs of each tenant's running jobs (a GPU that jobs share counts for each). " + jobJoin,
					Queries: []Query{{`sum by (tenant) (DCGM_FI_DEV_FB_USED{hpc_job!=""} * 1048576 ` + onJob + `)`, "{{tenant}}"}}},
				{Title: "GPU power by tenant", Unit: "watt", Stacked: true, Description: "Power drawn by the GPUs of each tenant's running jobs. " + jobJoin,
					Queries: []Query{{`sum by (tenant) (DCGM_FI_DEV_POWER_USAGE{hpc_job!=""} ` + onJob + `)`, "{{tenant}}"}}},
			}},
			{Title: "Queue", Panels: []Panel{
				{Title: "Pending jobs by tenant and reason", Stacked: true, Description: "Pending jobs and why Slurm holds them (QOSGrpGRES: the tenant's GPU limit; Resources: no free GPUs; Priority: others first).",
					Queries: []Query{{`sum by (tenant, reason) (strata_reclaim_pending_jobs)`, "{{tenant}}: {{reason}}"}}},
				{Title: "Pending jobs by partition", Description: "slurmctld's count of pending jobs per partition.",
					Queries: []Query{{`sum by (partition) (slurm_partition_jobs_pending)`, "{{partition}}"}}},
			}},
			{Title: "Reclaim", Panels: []Panel{
				{Title: "GPU-hours reclaimed: observed and bound", Kind: Stat, Unit: "short", Description: "In the dashboard's time range, by the reclaimed jobs' tenant. " +
					"Observed: the GPU-hours waiting jobs ran on the GPUs reclaimd freed, until the reclaimed jobs' time limits would have ended them (by Slurm's start times and GPU indices). " +
					"Bound: GPUs times what was left of the time limit of the jobs reclaimd requeued or cancelled, the most reclaim could give.",
					Queries: []Query{{`sum by (tenant) (increase(strata_reclaim_observed_gpu_seconds_total[$__range])) / 3600`, "{{tenant}} observed"},
						{`sum by (tenant) (increase(strata_reclaim_reclaimed_gpu_seconds_total[$__range])) / 3600`, "{{tenant}} bound"}}},
				{Title: "Reclaim actions", Kind: Stat, Description: "Warnings, signals, requeues and cancels in the time range, by result.",
					Queries: []Query{{`sum by (action, result) (increase(strata_reclaim_actions_total[$__range]))`, "{{action}} {{result}}"}}},
				{Title: "Reclaim actions over time", Description: "Actions per minute by action and result (failed: Slurm refused; the job keeps its GPUs).",
					Queries: []Query{{`sum by (action, result) (rate(strata_reclaim_actions_total[$__rate_interval])) * 60`, "{{action}} {{result}}"}}},
				{Title: "Jobs by reclaim phase", Stacked: true, Description: "Running GPU jobs by where they stand on the reclaim ladder.",
					Queries: []Query{{`sum by (phase) (strata_reclaim_jobs)`, "{{phase}}"}}},
			}},
			{Title: "Failures, retries and drained nodes", Panels: []Panel{
				{Title: "Job failures by class", Description: "Jobs that failed, per minute, by failure class.",
					Queries: []Query{{`sum by (class) (rate(strata_recovery_failures_total[$__rate_interval])) * 60`, "{{class}}"}}},
				{Title: "Retries by class and result", Description: "Retries per minute: requeued, exhausted (out of retries), refused or failed.",
					Queries: []Query{{`sum by (class, result) (rate(strata_recovery_retries_total[$__rate_interval])) * 60`, "{{class}} {{result}}"}}},
				{Title: "Nodes drained", Description: "Nodes Strata drained, and every drained or draining node as Slurm counts them.",
					Queries: []Query{
						{`sum by (partition) (strata_recovery_nodes_drained)`, "by Strata: {{partition}}"},
						{`sum by (partition) (slurm_partition_nodes_drain)`, "in Slurm: {{partition}}"},
					}},
				{Title: "GPU faults", Description: "GPU faults seen, per hour, by kind.",
					Queries: []Query{{`sum by (kind) (rate(strata_recovery_gpu_faults_total[$__rate_interval])) * 3600`, "{{kind}}"}}},
			}},
			{Title: "Serving", Panels: []Panel{
				{Title: "Serving replicas", Description: "Available replicas of the Deployments strata-bridge manages (kube-state-metrics with --metric-labels-allowlist=deployments=[app.kubernetes.io/managed-by]).",
					Queries: []Query{{`sum(kube_deployment_status_replicas_available * on (namespace, deployment) group_left () kube_deployment_labels{label_app_kubernetes_io_managed_by="strata"})`, "available"}}},
				{Title: "Deploys by outcome", Description: "The bridge's deploys and rollbacks per hour.",
					Queries: []Query{{`sum by (action, outcome) (rate(strata_bridge_deploys_total[$__rate_interval])) * 3600`, "{{action}} {{outcome}}"}}},
			}},
		}}
}

func topogen() Board {
	return Board{File: "strata-topogen.json", UID: "strata-topogen", Title: "Strata: topogen",
		Description: "topogen runs from topogen.timer; node_exporter's systemd collector (--collector.systemd) shows its runs, slurmctld its nodes.",
		Rows: []Row{{Title: "Runs", Panels: []Panel{
			{Title: "Since the last run", Kind: Stat, Unit: "s", Description: "Time since topogen.timer last started topogen (hourly by default).",
				Queries: []Query{{`time() - max by (instance) (node_systemd_timer_last_trigger_seconds{name="topogen.timer"})`, "{{instance}}"}}},
			{Title: "Last run failed", Kind: Stat, Description: "1 while topogen.service is in the failed state: the topology Slurm uses is the previous one.",
				Queries: []Query{{`max by (instance) (node_systemd_unit_state{name="topogen.service", state="failed"})`, "{{instance}}"}}},
			{Title: "topogen.service state", Description: "The unit's state over time.",
				Queries: []Query{{`max by (state) (node_systemd_unit_state{name="topogen.service"})`, "{{state}}"}}},
		}}, {Title: "Nodes", Panels: []Panel{
			{Title: "Nodes by partition", Description: "The nodes Slurm has in each partition (a node missing from topology.conf is unplaceable in a block or tree).",
				Queries: []Query{{`sum by (partition) (slurm_partition_nodes)`, "{{partition}}"}}},
			{Title: "Nodes not in service", Description: "Down, drained and failing nodes as Slurm counts them.",
				Queries: []Query{
					{`sum(slurm_nodes_down)`, "down"},
					{`sum(slurm_nodes_drain)`, "drain"},
					{`sum(slurm_nodes_fail)`, "fail"},
				}},
		}}}}
}

func policy() Board {
	return Board{File: "strata-policy.json", UID: "strata-policy", Title: "Strata: policy",
		Description: "What the tenants' limits (strata-policy apply) do in Slurm: GPUs held per account, and jobs waiting on a limit.",
		Rows: []Row{{Title: "Limits at work", Panels: []Panel{
			{Title: "GPUs allocated by account", Stacked: true, Description: "slurmctld's count of GPUs held per Slurm account.",
				Queries: []Query{{`sum by (account) (slurm_account_jobs_gpus_alloc)`, "{{account}}"}}},
			{Title: "Jobs pending on a GPU limit by tenant", Stacked: true, Description: "Pending jobs whose reason is a group GPU limit of their QOS or association (QOSGrpGRES, AssocGrpGRES).",
				Queries: []Query{{`sum by (tenant, reason) (strata_reclaim_pending_jobs{reason=~".*Grp(GRES|TRES).*"})`, "{{tenant}}: {{reason}}"}}},
			{Title: "Pending jobs by reason", Description: "Every pending reason, all tenants.",
				Queries: []Query{{`sum by (reason) (strata_reclaim_pending_jobs)`, "{{reason}}"}}},
			{Title: "Jobs by partition and state", Description: "Running and pending jobs per partition (slurmctld).",
				Queries: []Query{
					{`sum by (partition) (slurm_partition_jobs_running)`, "running {{partition}}"},
					{`sum by (partition) (slurm_partition_jobs_pending)`, "pending {{partition}}"},
				}},
		}}}}
}

func reclaimd() Board {
	return Board{File: "strata-reclaimd.json", UID: "strata-reclaimd", Title: "Strata: reclaimd",
		Description: "The reclaim controller and its agents: cycles, data age, errors, skips and actions.",
		Rows: []Row{{Title: "Controller", Panels: []Panel{
			{Title: "Up", Kind: Stat, Description: "1 when Prometheus scrapes the daemon.",
				Queries: []Query{
					{`up{job="strata-reclaimd"}`, "controller {{instance}}"},
					{`sum(up{job="strata-reclaimd-agent"})`, "agents up"},
				}},
			{Title: "Acting controller", Kind: Stat, Description: "1 for the controller that holds the lease and acts, 0 for a standby (or one waiting for its database); exactly one 1 per cluster (always 1 on SQLite).",
				Queries: []Query{{`strata_reclaim_lease_held`, "{{instance}}"}}},
			{Title: "Newest GPU sample age", Kind: Stat, Unit: "s", Description: "Age of the newest GPU sample at the start of the last cycle; above two sample intervals, jobs are not judged.",
				Queries: []Query{{`max(strata_reclaim_data_age_seconds)`, "age"}}},
			{Title: "Cycle duration", Unit: "s", Description: "Time one reclaim cycle takes (p50, p99).",
				Queries: []Query{
					{`histogram_quantile(0.5, sum by (le) (rate(strata_reclaim_cycle_duration_seconds_bucket[$__rate_interval])))`, "p50"},
					{`histogram_quantile(0.99, sum by (le) (rate(strata_reclaim_cycle_duration_seconds_bucket[$__rate_interval])))`, "p99"},
				}},
			{Title: "Errors", Description: "Per minute: cycles without a job list (slurmrestd) or without any GPU samples, nodes whose samples were missing, snapshots refused.",
				Queries: []Query{
					{`sum(rate(strata_reclaim_slurm_errors_total[$__rate_interval])) * 60`, "slurmrestd"},
					{`sum(rate(strata_reclaim_source_errors_total[$__rate_interval])) * 60`, "GPU samples"},
					{`sum(rate(strata_reclaim_agent_errors_total[$__rate_interval])) * 60`, "agent nodes"},
					{`sum by (reason) (rate(strata_reclaim_agent_snapshots_refused_total[$__rate_interval])) * 60`, "refused: {{reason}}"},
				}},
			{Title: "Skipped jobs by reason", Stacked: true, Description: "Jobs that got no action each cycle, by reason (stale_data and unreadable_record want a look).",
				Queries: []Query{{`sum by (reason) (rate(strata_reclaim_skipped_total[$__rate_interval])) * 60`, "{{reason}}"}}},
			{Title: "Actions by tenant", Description: "Actions per hour by tenant, action and result.",
				Queries: []Query{{`sum by (tenant, action, result) (rate(strata_reclaim_actions_total[$__rate_interval])) * 3600`, "{{tenant}} {{action}} {{result}}"}}},
			{Title: "Idle figure coverage", Unit: "percentunit", Description: "GPU time seen idle over the GPU time held by jobs judged idle: below 1, samples were missing.",
				Queries: []Query{{`sum by (tenant) (rate(strata_reclaim_idle_gpu_seconds_total[$__rate_interval])) / sum by (tenant) (rate(strata_reclaim_judged_idle_gpu_seconds_total[$__rate_interval]))`, "{{tenant}}"}}},
			{Title: "GPU-hours reclaimed by tenant and rule: observed and bound", Description: "Per hour. Observed: run by waiting jobs on the freed GPUs before the reclaimed jobs' time limits; bound: the GPUs until those limits.",
				Queries: []Query{{`sum by (tenant, rule) (rate(strata_reclaim_observed_gpu_seconds_total[$__rate_interval]))`, "{{tenant}} {{rule}} observed"},
					{`sum by (tenant, rule) (rate(strata_reclaim_reclaimed_gpu_seconds_total[$__rate_interval]))`, "{{tenant}} {{rule}} bound"}}},
		}}, {Title: "Agents", Panels: []Panel{
			{Title: "GPU utilisation by node", Unit: "percentunit", Description: "Mean of the latest samples of each node's GPUs.",
				Queries: []Query{{`avg by (instance) (strata_reclaim_agent_gpu_utilization_ratio)`, "{{instance}}"}}},
			{Title: "Since the last good sample", Unit: "s", Description: "Per agent; a stuck NVML shows here first.",
				Queries: []Query{{`time() - strata_reclaim_agent_last_sample_timestamp_seconds`, "{{instance}}"}}},
			{Title: "Sampling errors", Description: "Failed sampling rounds per minute, per agent.",
				Queries: []Query{{`rate(strata_reclaim_agent_sample_errors_total[$__rate_interval]) * 60`, "{{instance}}"}}},
			{Title: "GPU memory used by node", Unit: "bytes", Description: "Device memory in use, summed over each node's GPUs.",
				Queries: []Query{{`sum by (instance) (strata_reclaim_agent_gpu_memory_used_bytes)`, "{{instance}}"}}},
		}}, {Title: "Jobs' GPUs (dcgm-exporter)", Panels: []Panel{
			{Title: "Running GPU jobs without GPU metrics", Kind: Stat, Description: "Running GPU jobs whose GPUs no dcgm-exporter series names (hpc_job): the node lacks the job mapping prolog (slurm-plugins/dcgm-job-map-prolog.sh) or dcgm-exporter runs without --hpc-job-mapping-dir, or there is no dcgm-exporter at all.",
				Queries: []Query{{`count(strata_reclaim_job_info unless on (hpc_job) DCGM_FI_DEV_GPU_UTIL{hpc_job!=""}) or vector(0)`, "jobs"}}},
			{Title: "Top idle jobs", Kind: Stat, Description: "Running jobs holding the most idle GPU time over the last 30 minutes, in GPUs' worth. " + jobJoin,
				Queries: []Query{{`topk(10, sum by (hpc_job, tenant, account) ((1 - avg_over_time(DCGM_FI_DEV_GPU_UTIL{hpc_job!=""}[30m]) / 100) ` + onJob + `))`, "{{hpc_job}} {{tenant}} ({{account}})"}}},
			{Title: "GPU utilisation by job", Unit: "percentunit", Description: "Mean utilisation of each running job's GPUs. " + jobJoin,
				Queries: []Query{{`avg by (hpc_job, tenant) (DCGM_FI_DEV_GPU_UTIL{hpc_job!=""} / 100 ` + onJob + `)`, "{{hpc_job}} {{tenant}}"}}},
			{Title: "Graphics engine activity by job", Unit: "percentunit", Description: "Share of time each running job's GPUs had their graphics engine active (DCGM's profiling field: where the GPU has it, a finer figure than utilisation). " + jobJoin,
				Queries: []Query{{`avg by (hpc_job, tenant) (DCGM_FI_PROF_GR_ENGINE_ACTIVE{hpc_job!=""} ` + onJob + `)`, "{{hpc_job}} {{tenant}}"}}},
			{Title: "GPU memory used by job", Unit: "bytes", Description: "Device memory in use on each running job's GPUs (a GPU that jobs share counts for each). " + jobJoin,
				Queries: []Query{{`sum by (hpc_job, tenant) (DCGM_FI_DEV_FB_USED{hpc_job!=""} * 1048576 ` + onJob + `)`, "{{hpc_job}} {{tenant}}"}}},
		}}}}
}

func bridge() Board {
	return Board{File: "strata-bridge.json", UID: "strata-bridge", Title: "Strata: bridge",
		Description: "strata-bridge: polls of slurmrestd, verdicts on finished jobs, deploys, refusals and rollouts.",
		Rows: []Row{{Title: "Bridge", Panels: []Panel{
			{Title: "Up", Kind: Stat, Description: "1 when Prometheus scrapes the bridge.",
				Queries: []Query{{`up{job="strata-bridge"}`, "{{instance}}"}}},
			{Title: "Active bridge", Kind: Stat, Description: "1 for the bridge that holds the lease and acts, 0 for a standby; exactly one 1 (always 1 on SQLite).",
				Queries: []Query{{`strata_bridge_lease_held`, "{{instance}}"}}},
			{Title: "Since the last good poll", Kind: Stat, Unit: "s", Description: "Time since the bridge last read the job list from slurmrestd.",
				Queries: []Query{{`time() - max(strata_bridge_last_poll_timestamp_seconds)`, "age"}}},
			{Title: "Poll errors", Description: "Failed polls of slurmrestd per minute.",
				Queries: []Query{{`sum(rate(strata_bridge_poll_errors_total[$__rate_interval])) * 60`, "errors"}}},
			{Title: "Jobs judged by verdict", Stacked: true, Description: "Finished jobs the watcher judged, per hour, by verdict.",
				Queries: []Query{{`sum by (verdict) (rate(strata_bridge_jobs_judged_total[$__rate_interval])) * 3600`, "{{verdict}}"}}},
			{Title: "Deploys and rollbacks", Description: "Per hour, by action and outcome.",
				Queries: []Query{{`sum by (action, outcome) (rate(strata_bridge_deploys_total[$__rate_interval])) * 3600`, "{{action}} {{outcome}}"}}},
			{Title: "Refusals by check", Description: "Deploys refused before anything was created, per hour, by the check that failed.",
				Queries: []Query{{`sum by (check) (rate(strata_bridge_refusals_total[$__rate_interval])) * 3600`, "{{check}}"}}},
			{Title: "Rollout duration", Unit: "s", Description: "From the start of an apply to the end of its rollout (p50, p95).",
				Queries: []Query{
					{`histogram_quantile(0.5, sum by (le) (rate(strata_bridge_rollout_duration_seconds_bucket[$__rate_interval])))`, "p50"},
					{`histogram_quantile(0.95, sum by (le) (rate(strata_bridge_rollout_duration_seconds_bucket[$__rate_interval])))`, "p95"},
				}},
			{Title: "Deletes", Description: "Deployments deleted per hour, by outcome.",
				Queries: []Query{{`sum by (outcome) (rate(strata_bridge_deletes_total[$__rate_interval])) * 3600`, "{{outcome}}"}}},
		}}}}
}

func portal() Board {
	return Board{File: "strata-portal-api.json", UID: "strata-portal-api", Title: "Strata: portal API",
		Description: "strata-portal-api: its requests and latency, each cluster's snapshot and polls, what it asks of slurmrestd and reclaimd, and its sessions and their proxy.",
		Rows: []Row{{Title: "API", Panels: []Panel{
			{Title: "Up", Kind: Stat, Description: "1 when Prometheus scrapes the portal API.",
				Queries: []Query{{`up{job="strata-portal-api"}`, "{{instance}}"}}},
			{Title: "Requests by route", Stacked: true, Description: "API requests per second, by route pattern.",
				Queries: []Query{{`sum by (route) (rate(strata_portal_http_requests_total[$__rate_interval]))`, "{{route}}"}}},
			{Title: "Server errors", Unit: "percentunit", Description: "Share of requests answered 5xx, by route: above a few percent, look at the portal's log.",
				Queries: []Query{{`sum by (route) (rate(strata_portal_http_requests_total{code=~"5.."}[$__rate_interval])) / sum by (route) (rate(strata_portal_http_requests_total[$__rate_interval]))`, "{{route}}"}}},
			{Title: "Latency", Unit: "s", Description: "Time to answer (p50, p99, all routes); every read is served from the snapshot, so it should not follow slurmctld's load.",
				Queries: []Query{
					{`histogram_quantile(0.5, sum by (le) (rate(strata_portal_http_request_duration_seconds_bucket[$__rate_interval])))`, "p50"},
					{`histogram_quantile(0.99, sum by (le) (rate(strata_portal_http_request_duration_seconds_bucket[$__rate_interval])))`, "p99"},
				}},
			{Title: "Slowest routes", Unit: "s", Description: "p99 latency by route.",
				Queries: []Query{{`histogram_quantile(0.99, sum by (route, le) (rate(strata_portal_http_request_duration_seconds_bucket[$__rate_interval])))`, "{{route}}"}}},
		}}, {Title: "Clusters", Panels: []Panel{
			{Title: "Snapshot age by cluster", Kind: Stat, Unit: "s", Description: "How old each cluster's snapshot is; from the start, before the first good poll, the time since polling began. A cluster whose slurmrestd stops answering is served stale.",
				Queries: []Query{{`max by (cluster) (strata_portal_snapshot_age_seconds)`, "{{cluster}}"}}},
			{Title: "Polls by cluster and result", Description: "Polls per minute, ok or error.",
				Queries: []Query{{`sum by (cluster, result) (rate(strata_portal_polls_total[$__rate_interval])) * 60`, "{{cluster}} {{result}}"}}},
			{Title: "slurmrestd requests by cluster", Description: "Requests per minute to each cluster's slurmrestd: the pollers' and the actions made as users; it does not grow with the portal's readers.",
				Queries: []Query{{`sum by (cluster) (rate(strata_portal_slurmrestd_requests_total[$__rate_interval])) * 60`, "{{cluster}}"}}},
			{Title: "reclaimd requests by cluster", Description: "Requests per minute to each cluster's reclaimd (overview and attempts), by result.",
				Queries: []Query{{`sum by (cluster, result) (rate(strata_portal_reclaimd_requests_total[$__rate_interval])) * 60`, "{{cluster}} {{result}}"}}},
		}}, {Title: "Sessions", Panels: []Panel{
			{Title: "Sessions open by cluster and state", Stacked: true, Description: "Sessions not ended (JupyterLab, code-server, terminals), by cluster and state: SUBMITTED until the cluster's snapshot shows the job, then its Slurm state; counted by the idle loop each minute.",
				Queries: []Query{{`sum by (cluster, state) (strata_portal_sessions_open)`, "{{cluster}} {{state}}"}}},
			{Title: "Proxy connections", Description: "Requests and WebSockets open through the session proxy, all sessions; the busiest session's, and the cap one session may have (past it, 429).",
				Queries: []Query{
					{`sum by (instance) (strata_portal_session_proxy_connections)`, "open {{instance}}"},
					{`max by (instance) (strata_portal_session_proxy_busiest_session_connections)`, "busiest session {{instance}}"},
					{`max by (instance) (strata_portal_session_proxy_max_connections)`, "cap per session {{instance}}"},
				}},
			{Title: "Sessions at the connection cap", Kind: Stat, Description: "Sessions with as many connections open as the cap allows: their next tab or WebSocket is refused (alert StrataPortalSessionProxyAtCap).",
				Queries: []Query{{`sum by (instance) (strata_portal_session_proxy_sessions_at_cap)`, "{{instance}}"}}},
			{Title: "Proxy refusals by code", Description: "Requests to sessions the proxy refused per minute, by code: session_busy at the cap, session_starting while a server writes its connection file, session_unreachable when it does not answer.",
				Queries: []Query{{`sum by (code) (rate(strata_portal_session_proxy_refusals_total[$__rate_interval])) * 60`, "{{code}}"}}},
			{Title: "Proxied requests", Description: "Requests passed to sessions' servers per second, by server kind and protocol (websocket: an upgrade).",
				Queries: []Query{{`sum by (kind, protocol) (rate(strata_portal_session_proxy_requests_total[$__rate_interval]))`, "{{kind}} {{protocol}}"}}},
			{Title: "Proxied bytes", Unit: "Bps", Description: "Bytes of the servers' HTTP answers sent through the proxy per second, by server kind; WebSocket frames are not counted.",
				Queries: []Query{{`sum by (kind) (rate(strata_portal_session_proxy_response_bytes_total[$__rate_interval]))`, "{{kind}}"}}},
		}}}}
}
