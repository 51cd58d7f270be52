-- Runs job_submit.lua outside slurmctld, for the unit tests of jobsubmit_test.go: `slurm` is
-- the table slurmctld gives the script (the constants it uses, the log functions), os.time is
-- a clock the steps move, and each job is a plain table with Slurm's "not set" values.
-- arg[1] is a directory holding job_submit.lua and steps.lua; the plugin's data file is
-- strata/policy.lua there, which steps write and remove. With arg[2] "serve", after the steps
-- of steps.lua it reads more steps on standard input, each a line with its length in bytes
-- and then a chunk of that length returning the step, and answers each with its line: one
-- interpreter for many steps (FuzzGPURequest's).
local dir = arg[1]
local load_chunk = loadstring or load -- before the globals are fenced: loadstring is Lua 5.1's
local NO_VAL, NO_VAL16 = 4294967294, 65534

local logs, user_msgs = {}, {}
local function logger(level)
	return function(fmt, ...)
		logs[#logs + 1] = level .. ": " .. string.format(fmt, ...)
	end
end
slurm = {
	SUCCESS = 0, ERROR = -1, ESLURM_INVALID_PARTITION_NAME = 2000, ESLURM_ACCESS_DENIED = 2002,
	ESLURM_INVALID_ACCOUNT = 2045, ESLURM_ACCOUNTING_POLICY = 2050, ESLURM_INVALID_TIME_LIMIT = 2051,
	ESLURM_INVALID_QOS = 2066, NO_VAL = NO_VAL, INFINITE = 4294967295, JOB_SHARED_NONE = 0,
	log_info = logger("info"), log_error = logger("error"), log_debug = logger("debug"), log_verbose = logger("verbose"),
	log_user = function(fmt, ...)
		user_msgs[#user_msgs + 1] = string.format(fmt, ...)
	end,
}
local steps = dofile(dir .. "/steps.lua")
slurm.CLUSTER_NAME = steps.cluster

local clock = 1000000
os.time = function()
	return clock
end
-- The script defines two globals and reads only what Lua and slurmctld define: a typo in a
-- name fails here instead of passing as nil.
local defines = { slurm_job_submit = true, slurm_job_modify = true }
local may_be_nil = { setfenv = true, loadstring = true } -- Lua 5.1 only
setmetatable(_G, {
	__newindex = function(t, k, v)
		if not defines[k] then
			error("job_submit.lua sets the global " .. tostring(k), 2)
		end
		rawset(t, k, v)
	end,
	__index = function(_, k)
		if not may_be_nil[k] then
			error("job_submit.lua reads the undefined global " .. tostring(k), 2)
		end
	end,
})
assert(dofile(dir .. "/job_submit.lua") == slurm.SUCCESS, "the script must return slurm.SUCCESS")

local FIELDS = { "account", "partition", "qos", "time_limit", "requeue", "req_switch", "shared" }
local function job_desc(fields)
	local j = {
		time_limit = NO_VAL, min_nodes = NO_VAL, max_nodes = NO_VAL, num_tasks = NO_VAL, req_switch = NO_VAL,
		wait4switch = NO_VAL, requeue = NO_VAL16, shared = NO_VAL16, sockets_per_node = NO_VAL16,
		ntasks_per_node = NO_VAL16, cpus_per_task = NO_VAL16, user_id = 26002, name = "test", het_job_offset = NO_VAL,
	}
	for k, v in pairs(fields) do
		j[k] = v
	end
	if fields.explode then -- reading this field fails, as a broken accessor of slurmctld would
		j.explode = nil
		setmetatable(j, { __index = function(_, k)
			if k == fields.explode then
				error("cannot read " .. k)
			end
		end })
	end
	return j
end

local function write(path, text)
	os.execute("mkdir -p '" .. dir .. "/strata'")
	local f = assert(io.open(path, "wb"))
	f:write(text)
	f:close()
end

-- One line per step: name, rc, what the user was told, the fields the plugin changed and
-- the log lines it wrote, tab-separated.
local function run(s)
	logs, user_msgs = {}, {}
	local data = dir .. "/strata/policy.lua"
	if s.write then
		write(data, s.write)
	elseif s.remove then
		os.remove(data)
	end
	clock = clock + (s.advance or 0)
	local out = ""
	if s.job and s.rec then
		-- A change: job is the request (only what it sets; the rest is Slurm's "not set"),
		-- rec the job as slurmctld holds it.
		local j = job_desc(s.job)
		j.user_id, j.user_name, j.name = NO_VAL, nil, nil
		local rc = slurm_job_modify(j, s.rec, {}, s.modify_uid or s.rec.user_id or 26002)
		out = tostring(rc) .. "\t" .. table.concat(user_msgs, " | ") .. "\t"
	elseif s.job then
		local j = job_desc(s.job)
		local before = {}
		for _, k in ipairs(FIELDS) do
			before[k] = j[k]
		end
		local rc = slurm_job_submit(j, {}, j.user_id)
		local changed = {}
		for _, k in ipairs(FIELDS) do
			if j[k] ~= before[k] then
				changed[#changed + 1] = k .. "=" .. tostring(j[k])
			end
		end
		out = tostring(rc) .. "\t" .. (table.concat(user_msgs, " | "):gsub("[\t\n]", " ")) .. "\t" .. table.concat(changed, " ")
	else
		out = "\t\t"
	end
	io.write(s.name, "\t", out, "\t", (table.concat(logs, " | "):gsub("[\t\n]", " ")), "\n")
end

for _, s in ipairs(steps) do
	run(s)
end
if arg[2] == "serve" then
	io.flush()
	while true do
		local n = io.read("*l")
		if not n then
			break
		end
		run(assert(load_chunk(io.read(tonumber(n))))())
		io.flush()
	end
end
