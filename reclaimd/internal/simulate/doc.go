// Package simulate is `reclaimd simulate`: it runs reclaimd's pure
// [decide.Decide] over a recorded trace of jobs and GPU samples, cycle by
// cycle on a virtual clock, and reports the GPU-hours the rules would
// reclaim, the jobs they would touch and each job's timeline, so that an
// admin can tune the rules before turning them on.
//
// # The trace
//
// A trace is two CSV files (RFC 4180, as encoding/csv reads them): the jobs
// and the GPU samples. Both start with a header that names the columns, in
// any order; lines that start with # are comments, blank lines are skipped
// and fields are trimmed. Times are RFC 3339 ("2026-11-29T12:00:00Z",
// "2026-11-29T13:00:00+01:00") or Unix seconds ("1795953600", "1795953600.5").
//
// The jobs file, one row per run of a job (see [ParseJobs]):
//
//	job_id,user,account,tenant,class,qos,partition,start,end,gpus
//	1001,alice,ml-lab,research,train,normal,gpu,2026-11-29T12:00:00Z,2026-11-29T16:00:00Z,gpu-001:0;gpu-001:1
//
// job_id, start, end and gpus are required; user, account, tenant, class,
// qos and partition are what rules and exemptions match on and may be left
// out or empty, spelled as the rules spell them. end is when the run really
// ended. gpus lists the run's GPUs as node:index, separated by ";", the
// index being the one Slurm reports in the job's gres_detail (IDX in
// `scontrol show job -d`). sacct gives the rest: JobIDRaw, User, Account,
// QOS, Partition, Start, End. The same job_id may appear on several rows
// when the runs do not overlap: a job that Slurm requeued. Each later run
// counts as one requeue of the job, for the rules' requeue limits.
//
// The samples file, one row per GPU and time (see [ParseSamples]):
//
//	time,node,gpu,util,mem_activity,mem_used_mib
//	2026-11-29T12:00:30Z,gpu-001,0,0,0.3,30500
//
// time, node, gpu, util and mem_activity are required, mem_used_mib is
// optional. A sample describes the interval before its time, as reclaimd's
// agent takes them; rows may come in any order. util is NVML's
// utilization.gpu or DCGM's GPU_UTIL, mem_activity DCGM's DRAM active or
// NVML's utilization.memory, both in percent; mem_used_mib is evidence
// only. A Prometheus range query of DCGM's or the agent's gauges becomes
// this file with one row per GPU and step. The sample interval is taken to
// be the commonest gap between a GPU's samples.
//
// Parsers report every bad line at once (up to 20, then a count), each as
// "file:line: message". [Trace.WriteCSV] writes a trace back in this
// format, so a converted trace can be edited by hand.
//
// # The simulation
//
// [Run] steps a virtual clock from the first job's start to the last job's
// end (or [Options.From] to [Options.To]) by [Options.Step], reclaimd's
// cycle interval. At each step it builds the [decide.Snapshot] the daemon
// would: the runs in progress (start ≤ t < end), each GPU's samples over
// the longest rule window before t, metrics source and slurmrestd both
// answering, and the job states [decide.Decide] returned the step before;
// it records every action. A sliding index over each GPU's samples keeps a
// run at O(samples + steps × running GPUs), plus Decide's own work.
//
// The report counts as touched every run with an action, warnings and
// notices included (its owner would have heard from reclaimd), and as
// reclaimed those requeued or cancelled. Idle GPU-hours run from a run's
// warning or notice until it recovers, ends or is reclaimed.
//
// A run the simulation requeues or cancels stops holding its GPUs at that
// moment: GPUs × (its recorded end − that moment) is the time reclaimed.
// A requeued job is NOT run again: the trace cannot say when Slurm would
// have started it or how it would have behaved, so the report counts what
// the requeue frees, not what the rerun would cost. Dry-run rules
// ("dry_run": true) are simulated as if they were on, with a note in the
// report: the question the report answers is what the rules would do.
//
// # ClusterCockpit traces
//
// [FromClusterCockpit] converts a ClusterCockpit job export (such as the
// NHR@FAU Alex jobs in testdata). That export holds each job's AVERAGE GPU
// utilisation, not a series: the converter synthesises a FLAT series at the
// average for each of the job's GPUs, one sample per step. Bursts are not
// modelled: a job that worked hard for an hour and then sat idle for ten
// averages to a low value and looks idle from its start, and a job that
// averages 6 % is never idle under a 5 % threshold even when it idled for
// hours. Memory activity is not in the export either and is set to 0, so
// only utilisation decides. The report of such a trace says so in its
// header ("flat series from per-job averages: bursts are not modelled").
// Treat its numbers as an order of magnitude, not a forecast.
package simulate
