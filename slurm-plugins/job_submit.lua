--[[
Strata's job_submit.lua, for Slurm's job_submit/lua plugin (JobSubmitPlugins=lua in slurm.conf;
this file goes beside slurm.conf). Slurm 24.11 through 26.05; Lua 5.1 (Debian's build) to 5.4.

It reads the policy data that `strata-policy render` writes to strata/policy.lua beside this
file (/etc/slurm/strata/policy.lua) and, for a job whose account the policy manages:
  - picks the job's workload class: --comment=strata:class=<name>, else the class of the
    job's partition, else the cluster's default class;
  - fills in what the job leaves out: the account (the user's default account in the
    policy), the partition and the QOS (the class), the time limit (the class's
    default_time), the requeue flag (set for requeueable classes, cleared for the others),
    and --switches for multi-node jobs of a class with a switch rule;
  - rejects, with a message that names the rule and the policy line, a user who is not a
    member of the account (viewers are not), a class the project may not use, a QOS or
    partition that is not the class's, GPUs above the class's max_gpus_per_job or the
    project's (or tenant's) GPU limits, a time limit above the class's max_time, and a
    multi-node job of a whole_nodes class that is not --exclusive, and a --container (Slurm's
    OCI bundle, <oci_bundles>/<image>) whose image is not on the tenant's image allow-list.
The components of a heterogeneous job (sbatch ... : ...) come one by one, in order, each with
its het_job_offset: their GPUs are summed, so 2 + 2 GPUs is 4 against a class's
max_gpus_per_job and the project's and tenant's limits (each class, account and GPU type counts
the components that share it).
Jobs under accounts the policy does not manage pass untouched. Without the data file, or with
one it cannot read, every job passes untouched: slurmctld's log says why at error level, once
(again when the condition changes), and each job's submitter is told that the job was not
checked (sbatch prints it), so nobody mistakes an unchecked cluster for a checked one.

The data file is re-read when it changes: at most every RELOAD_SECONDS, the file is read and
compared with the copy in memory, and only a changed file is parsed again. It is loaded as
data: text only, no globals, and a bound on the instructions it may run.

slurm_job_modify applies the same checks to the job as the change would leave it (each field the
change sets, else the job's own), when the change touches a field the checks read (account,
partition, QOS, comment, time limit, GPUs, node and task counts, --exclusive); a change of
anything else, and any change by root, passes. It fills in nothing. Slurm's own checks still
hold too. Nothing in here can fail a submission or a change by mistake: the work runs under
pcall, and an error lets the job through and is logged.
]]

local RELOAD_SECONDS = 5
local FORMAT = 1 -- the data layout this file reads (policy/internal/render.JobSubmitFormat)
local MAX_INSTRUCTIONS = 10000000 -- a data file that runs longer is broken (a loop, not data)

local NO_VAL = 4294967294 -- Slurm's "not set" for 32-bit fields
local INFINITE = 4294967295
local NO_VAL16 = 65534
local INFINITE16 = 65535

-- n32 and n16 read a 32-bit or 16-bit number of the job: nil when it is not set (or
-- infinite; the time limit is read on its own).
local function n32(v)
	if v == nil or v == NO_VAL or v == INFINITE then
		return nil
	end
	return tonumber(v)
end

local function n16(v)
	if v == nil or v == NO_VAL16 or v == INFINITE16 then
		return nil
	end
	return tonumber(v)
end

-- The data file sits in strata/ beside this script, which Slurm loads from the directory of
-- slurm.conf; /etc/slurm when Lua cannot say where the script is.
local DATA_FILE = (function()
	local dir = "/etc/slurm"
	if debug and debug.getinfo then
		local src = debug.getinfo(1, "S").source
		if type(src) == "string" and src:sub(1, 1) == "@" then
			dir = src:sub(2):match("^(.*)/[^/]*$") or dir
		end
	end
	return dir .. "/strata/policy.lua"
end)()

---------------------------------------------------------------------------------------------
-- Loading the data file
---------------------------------------------------------------------------------------------

-- compile turns the file's text into a function with an empty environment: it sees no
-- globals (no io, os, require), and binary chunks are refused (they can crash the VM).
local function compile(text)
	if text:byte(1) == 27 then
		return nil, "it is a compiled Lua chunk, not text"
	end
	local env = {}
	if setfenv and loadstring then -- Lua 5.1
		local fn, err = loadstring(text, "=" .. DATA_FILE)
		if not fn then
			return nil, err
		end
		setfenv(fn, env)
		return fn
	end
	return load(text, "=" .. DATA_FILE, "t", env)
end

-- run calls fn in a coroutine that a count hook stops after MAX_INSTRUCTIONS.
local function run(fn)
	local co = coroutine.create(fn)
	if debug and debug.sethook then
		debug.sethook(co, function()
			error("it runs too long: data is a table, not a program", 0)
		end, "", MAX_INSTRUCTIONS)
	end
	local ok, res = coroutine.resume(co)
	if not ok then
		return nil, tostring(res)
	end
	if coroutine.status(co) ~= "dead" then
		return nil, "it yields instead of returning a table"
	end
	return res
end

-- check returns an error message when v at path is not of type want.
local function check(v, want, path)
	if type(v) ~= want then
		return path .. ": want a " .. want .. ", got " .. type(v)
	end
end

local function join(path, key)
	if path == "" then
		return key
	end
	return path .. "." .. key
end

local function check_map(m, path, each)
	local err = check(m, "table", path)
	if err then
		return err
	end
	for k, v in pairs(m) do
		if type(k) ~= "string" then
			return path .. ": a key is a " .. type(k) .. ", want a string"
		end
		err = each(v, join(path, k))
		if err then
			return err
		end
	end
end

-- check_list checks that l is a list (keys 1 to n) of values of type want.
local function check_list(l, path, want)
	local err = check(l, "table", path)
	if err then
		return err
	end
	local n = 0
	for _ in pairs(l) do
		n = n + 1
	end
	for i = 1, n do
		err = check(l[i], want, path .. "[" .. i .. "]")
		if err then
			return err
		end
	end
end

-- check_fields checks the fields of t, in the order of their names, so the first problem
-- is the one reported.
local function check_fields(t, path, fields)
	local err = check(t, "table", path)
	if err then
		return err
	end
	local names = {}
	for name in pairs(fields) do
		names[#names + 1] = name
	end
	table.sort(names)
	for _, name in ipairs(names) do
		local want, v = fields[name], t[name]
		if type(want) == "function" then
			err = want(v, join(path, name))
		elseif want:sub(1, 1) == "?" then
			if v ~= nil then
				err = check(v, want:sub(2), join(path, name))
			end
		else
			err = check(v, want, join(path, name))
		end
		if err then
			return err
		end
	end
end

local function is(want)
	return function(v, path)
		return check(v, want, path)
	end
end

local function limit(v, path)
	if v == nil then
		return nil
	end
	return check_fields(v, path, { limit = "number", owner = "string", line = "number" })
end

-- validate checks the layout of a loaded data file (format 1), so that the rules below can
-- read it without checking types.
local function validate(d)
	local err = check(d, "table", "the file")
	if err then
		return err .. " (it must `return { ... }`)"
	end
	if d.version ~= FORMAT then
		return "it has format " .. tostring(d.version) .. ", this job_submit.lua reads format " .. FORMAT ..
			": install the job_submit.lua of the strata-policy that wrote it"
	end
	err = check_fields(d, "", {
		source = "string",
		cluster = "string",
		default_class = "?string",
		classes_line = "number",
		classes = function(v, path)
			return check_map(v, path, function(c, p)
				return check_fields(c, p, {
					partition = "string", default_time = "number", max_time = "number",
					requeue = "boolean", whole_nodes = "boolean", switches = "number",
					max_gpus_per_job = "number", line = "number", max_time_line = "number",
					max_gpus_line = "number", whole_nodes_line = "number",
				})
			end)
		end,
		partitions = function(v, path)
			return check_map(v, path, is("string"))
		end,
		accounts = function(v, path)
			return check_map(v, path, function(a, p)
				return check_fields(a, p, {
					tenant = "string", project = "string", line = "number", classes_line = "number",
					classes = function(s, sp)
						return check_map(s, sp, is("boolean"))
					end,
					gpus = limit,
					gpus_by_type = function(s, sp)
						return check_map(s, sp, limit)
					end,
					members = function(s, sp)
						return check_map(s, sp, is("boolean"))
					end,
					viewers = function(s, sp)
						return check_map(s, sp, is("number"))
					end,
					images = function(s, sp)
						if s == nil then
							return nil
						end
						return check_list(s, sp, "string")
					end,
					images_line = "?number",
				})
			end)
		end,
		users = function(v, path)
			return check_map(v, path, is("string"))
		end,
		oci_bundles = "?string",
	})
	if err then
		return err
	end
	if d.default_class and not d.classes[d.default_class] then
		return "default_class " .. d.default_class .. " is not a class"
	end
	for part, class in pairs(d.partitions) do
		if not d.classes[class] then
			return "partitions." .. part .. ": " .. class .. " is not a class"
		end
	end
	if slurm.CLUSTER_NAME and d.cluster ~= slurm.CLUSTER_NAME then
		return "it is the policy of cluster " .. d.cluster .. ", and this is " .. tostring(slurm.CLUSTER_NAME)
	end
end

local function count(t)
	local n = 0
	for _ in pairs(t) do
		n = n + 1
	end
	return n
end

-- state is what survives between jobs: the policy in use (nil: none), the text it came from,
-- when the file was last looked at, and the last condition logged (so each is logged once).
-- problem is why there is no policy in use (nil: there is one), for the users' message; het
-- is the heterogeneous job whose components are being submitted.
local state = { policy = nil, text = nil, checked = nil, logged = nil, problem = nil, het = nil }

local function log_once(key, level, msg)
	if state.logged ~= key then
		state.logged = key
		slurm[level]("%s", msg)
	end
end

-- policy returns the policy in use, re-reading the data file at most every RELOAD_SECONDS.
local function policy()
	local now = os.time()
	if state.checked and now - state.checked < RELOAD_SECONDS and now >= state.checked then
		return state.policy
	end
	state.checked = now
	local f, oerr = io.open(DATA_FILE, "rb")
	if not f then
		state.policy, state.text = nil, nil
		state.problem = "its data file " .. DATA_FILE .. " is missing"
		log_once("missing", "log_error", "strata: no policy data (" .. tostring(oerr) ..
			"): jobs pass unchecked until `strata-policy render` writes it")
		return nil
	end
	local text = f:read("*a") or ""
	f:close()
	if text == state.text then
		return state.policy
	end
	state.text = text
	local fn, err, d
	if not text:find("%S") then
		-- An empty file compiles and returns nothing: say so, not "want a table, got nil".
		err = "it is empty (a render that was cut short?): run `strata-policy render` to write it again"
	else
		fn, err = compile(text)
	end
	if fn then
		d, err = run(fn)
	end
	if not err then
		-- Also when the chunk returned nothing: validate says it is no table.
		err = validate(d)
	end
	if err then
		state.policy = nil
		state.problem = "its data file " .. DATA_FILE .. " is broken"
		log_once("broken " .. err, "log_error", "strata: " .. DATA_FILE .. " is broken, so jobs pass unchecked until it is fixed: " .. err)
		return nil
	end
	state.policy, state.problem = d, nil
	state.logged = "loaded"
	slurm.log_info("%s", "strata: loaded " .. DATA_FILE .. ": " .. count(d.classes) .. " classes, " ..
		count(d.accounts) .. " accounts, " .. count(d.users) .. " users")
	return d
end

---------------------------------------------------------------------------------------------
-- GPUs a job asks for
---------------------------------------------------------------------------------------------

local SUFFIX = { [""] = 1, k = 1024, m = 1024 ^ 2, g = 1024 ^ 3, t = 1024 ^ 4, p = 1024 ^ 5 }

-- MAX_GPUS is more GPUs than any job gets. Counts are kept as floats and refused above it, so
-- that a count like 99999999999999999999 neither wraps (Lua 5.3+ integers) nor prints as
-- -9223372036854775808 (Lua 5.1's %d of a huge double), and never passes a limit by wrapping.
local MAX_GPUS = 2 ^ 31 - 1

-- gpu_entry reads one entry of a TRES request: "gres/gpu:2", "gres/gpu:h100:2", "gres:gpu:2"
-- (the older spelling), "gpu:2", "gres/gpu=2" and "gres/gpu:h100=2" (tres_per_task), "gres/gpu"
-- (one). It returns the count and the type (nil: any), or nil when it is not a GPU.
local function gpu_entry(item)
	item = item:gsub("%(.*$", ""):gsub("^%s+", ""):gsub("%s+$", "")
	local rest = item:match("^gres[/:]gpu(.*)$") or item:match("^gpu(.*)$")
	if not rest or not (rest == "" or rest:match("^[:=]")) then
		return nil -- another TRES or GRES (cpu=2, gres/gpumem, gres/shard)
	end
	local typ, num
	local head, eq = rest:match("^(.-)=(.*)$")
	if eq then
		rest, num = head, eq
	end
	local fields = {}
	for f in rest:gmatch("[^:]+") do
		fields[#fields + 1] = f
	end
	if not num and #fields > 0 and fields[#fields]:match("^%d+[kKmMgGtTpP]?$") then
		num = table.remove(fields)
	end
	typ = fields[1]
	if not num then
		return 1, typ
	end
	local digits, suffix = num:match("^(%d+)([kKmMgGtTpP]?)$")
	if not digits then
		return nil -- not a count Slurm would accept; Slurm rejects the job itself
	end
	return (tonumber(digits) + 0.0) * SUFFIX[suffix:lower()], typ
end

-- gpus_in sums the GPUs of one TRES request string, in all and by type.
local function gpus_in(s, times, total, by_type)
	if type(s) ~= "string" or s == "" then
		return
	end
	local sum, types = 0, {}
	for item in s:gmatch("[^,]+") do
		local n, typ = gpu_entry(item)
		if n then
			sum = sum + n
			if typ then
				types[typ] = (types[typ] or 0) + n
			end
		end
	end
	-- The request fields describe the same GPUs from different sides (--gpus=8 with
	-- --gpus-per-node=4 on 2 nodes is 8 GPUs, not 16): the job gets at least the largest.
	total.n = math.max(total.n, sum * times)
	for typ, n in pairs(types) do
		by_type[typ] = math.max(by_type[typ] or 0, n * times)
	end
end

-- gpu_request is the job's GPU request fields as given, for a message.
local function gpu_request(job_desc)
	local out = {}
	for _, k in ipairs({ "tres_per_job", "tres_per_node", "tres_per_socket", "tres_per_task" }) do
		local v = job_desc[k]
		if type(v) == "string" and v ~= "" then
			out[#out + 1] = k .. "=" .. v
		end
	end
	return table.concat(out, " ")
end

-- gpus returns the fewest GPUs the job can run with, in all and by type: per node times the
-- nodes it asks for at least, per socket times sockets per node (1 when not given) and
-- nodes, per task times its tasks. A job with a range of nodes may get more; Slurm's QOS and
-- association limits hold for those.
local function gpus(job_desc)
	local nodes = n32(job_desc.min_nodes) or 1
	if nodes < 1 then
		nodes = 1
	end
	local tasks = n32(job_desc.num_tasks)
	if not tasks then
		tasks = (n16(job_desc.ntasks_per_node) or 1) * nodes
	end
	local sockets = n16(job_desc.sockets_per_node) or 1
	local total, by_type = { n = 0 }, {}
	gpus_in(job_desc.tres_per_job, 1, total, by_type)
	gpus_in(job_desc.tres_per_node, nodes, total, by_type)
	gpus_in(job_desc.tres_per_socket, sockets * nodes, total, by_type)
	gpus_in(job_desc.tres_per_task, tasks, total, by_type)
	return total.n, by_type
end

---------------------------------------------------------------------------------------------
-- The rules
---------------------------------------------------------------------------------------------

local function code(name)
	return slurm[name] or slurm.ERROR
end

-- minutes formats a time limit as Slurm does: "2-00:00:00", "04:00:00".
local function minutes(m)
	if m == INFINITE then
		return "UNLIMITED"
	end
	local d = math.floor(m / 1440)
	local h = math.floor((m % 1440) / 60)
	local s = string.format("%02d:%02d:00", h, math.floor(m % 60))
	if d > 0 then
		return string.format("%d-%s", d, s)
	end
	return s
end

local function names(set)
	local out = {}
	for k in pairs(set) do
		out[#out + 1] = k
	end
	table.sort(out)
	return table.concat(out, ", ")
end

local function multi_node(job_desc)
	local min, max = n32(job_desc.min_nodes), n32(job_desc.max_nodes)
	return (min and min > 1) or (max and max > 1) or false
end

-- het_sums returns what the earlier components of the job's heterogeneous job ask for
-- (GPUs by class, by limit owner, by owner and type), or empty sums for a job that is not
-- one. Slurm passes the components of one heterogeneous job in order (het_job_offset 0, 1,
-- ...) within one request, holding its job lock, so no other job comes between them; a
-- component that does not follow the last one seen (a restart of slurmctld between them)
-- starts a new sum rather than borrowing another job's.
local function het_sums(job_desc, user)
	local off = n32(job_desc.het_job_offset)
	if off == nil then
		state.het = nil
		return { class = {}, owner = {}, typed = {} }
	end
	local h = state.het
	if off == 0 or not h or h.user ~= user or h.next ~= off then
		h = { user = user, class = {}, owner = {}, typed = {} }
		state.het = h
	end
	h.next = off + 1
	return h
end

-- het_add adds a component that passed to its heterogeneous job's sums.
local function het_add(h, job, acct, n, by_type)
	h.class[job.class] = (h.class[job.class] or 0) + n
	if acct.gpus then
		h.owner[acct.gpus.owner] = (h.owner[acct.gpus.owner] or 0) + n
	end
	for typ, m in pairs(by_type) do
		local l = acct.gpus_by_type[typ]
		if l then
			local k = l.owner .. "\0" .. typ
			h.typed[k] = (h.typed[k] or 0) + m
		end
	end
end

---------------------------------------------------------------------------------------------
-- Container images
---------------------------------------------------------------------------------------------

local DEFAULT_OCI_BUNDLES = "/srv/strata/bundles" -- jobpolicy.DefaultOCIBundles

-- image_of_bundle returns the image a --container path is the bundle of: the path under
-- the bundle directory, with no empty, "." or ".." component; nil for any other path.
local function image_of_bundle(bundles, container)
	local prefix = bundles .. "/"
	if container:sub(1, #prefix) ~= prefix then
		return nil
	end
	local image = container:sub(#prefix + 1)
	if image == "" then
		return nil
	end
	for c in (image .. "/"):gmatch("([^/]*)/") do
		if c == "" or c == "." or c == ".." then
			return nil
		end
	end
	return image
end

-- image_allowed says whether the allow-list lets a job run image: an entry is the image, or
-- a prefix pattern "registry.example.com/acme/*" whose path the image is under.
local function image_allowed(list, image)
	for _, pat in ipairs(list) do
		if pat:sub(-2) == "/*" then
			local prefix = pat:sub(1, -2)
			if image:sub(1, #prefix) == prefix then
				return true
			end
		elseif image == pat then
			return true
		end
	end
	return false
end

-- check_image checks the image of the job's --container (Slurm's OCI support, the one
-- container request job_desc shows: pyxis's --container-image is an srun SPANK option and
-- apptainer a command of the script, neither visible here) against the tenant's allow-list.
local function check_image(p, job, acct, fail)
	local container = job.desc.container
	if type(container) ~= "string" or container == "" then
		return nil
	end
	local bundles = p.oci_bundles or DEFAULT_OCI_BUNDLES
	local list = acct.images or {}
	local image = image_of_bundle(bundles, container)
	if not image then
		return fail("ESLURM_ACCOUNTING_POLICY", acct.images_line, "--container=" .. container ..
			" is not the bundle of an image: run an image tenant " .. acct.tenant .. " may run, from its bundle " ..
			bundles .. "/<image>")
	end
	if image_allowed(list, image) then
		return nil
	end
	if #list == 0 then
		return fail("ESLURM_ACCOUNTING_POLICY", acct.images_line, "tenant " .. acct.tenant ..
			" may run no container images (" .. image .. "): add the image to the tenant's images")
	end
	return fail("ESLURM_ACCOUNTING_POLICY", acct.images_line, "tenant " .. acct.tenant ..
		" may not run container image " .. image .. "; it may run " .. table.concat(list, ", "))
end

-- check_job returns nil when the job passes, or the Slurm error code and the message.
-- It changes nothing; apply does, once the job passed. het holds what the earlier
-- components of a heterogeneous job ask for (het_sums).
local function check_job(p, job, user, het)
	local function fail(rc, line, msg)
		if line and line > 0 then
			msg = msg .. " (" .. p.source .. ":" .. string.format("%d", line) .. ")"
		end
		return code(rc), "strata: " .. msg
	end

	local acct = p.accounts[job.account]
	if not job.member_by_slurm and not acct.members[user] then
		if acct.viewers[user] then
			return fail("ESLURM_INVALID_ACCOUNT", acct.viewers[user], "user " .. user .. " is not a member of account " ..
				job.account .. ": a viewer cannot submit jobs")
		end
		return fail("ESLURM_INVALID_ACCOUNT", acct.line, "user " .. user .. " is not a member of account " .. job.account)
	end

	local class = p.classes[job.class]
	if job.class_from == "comment" and not class then
		return fail("ESLURM_INVALID_QOS", p.classes_line, "there is no class " .. job.class ..
			" (--comment=strata:class=" .. job.class .. "); the classes are " .. names(p.classes))
	end
	if not acct.classes[job.class] then
		return fail("ESLURM_INVALID_QOS", acct.classes_line, "account " .. job.account .. " may not use class " ..
			job.class .. "; it may use " .. names(acct.classes))
	end
	if job.qos and job.qos ~= job.class then
		return fail("ESLURM_INVALID_QOS", class.line, "the QOS of a job is its class, " .. job.class .. " (" ..
			job.class_why .. "): leave out --qos=" .. job.qos .. ", or choose the class with --comment=strata:class=<name>")
	end
	if job.class_from == "comment" and job.partition and job.partition ~= class.partition then
		return fail("ESLURM_INVALID_PARTITION_NAME", class.line, "class " .. job.class .. " runs in partition " ..
			class.partition .. ", not " .. job.partition .. ": leave out --partition")
	end

	if job.time and class.max_time > 0 and (job.time == INFINITE or job.time > class.max_time) then
		return fail("ESLURM_INVALID_TIME_LIMIT", class.max_time_line, "class " .. job.class .. " allows at most " ..
			minutes(class.max_time) .. "; this job asks for " .. minutes(job.time))
	end

	local n, by_type = gpus(job.desc)
	local most = n
	for _, m in pairs(by_type) do
		most = math.max(most, m)
	end
	if most > MAX_GPUS then
		return fail("ESLURM_ACCOUNTING_POLICY", nil, string.format(
			"this job asks for more than %d GPUs (--gpus, --gres or --gpus-per-*: %s); give the count it needs",
			MAX_GPUS, gpu_request(job.desc)))
	end
	-- asks says how many GPUs the job asks for: with the earlier components of a
	-- heterogeneous job (before) when there are any.
	local function asks(total, before)
		if before > 0 then
			return string.format("this heterogeneous job asks for %d (%d in its earlier components, %d in this one)",
				total, before, total - before)
		end
		return string.format("this job asks for %d", total)
	end
	local before = het.class[job.class] or 0
	if class.max_gpus_per_job > 0 and n + before > class.max_gpus_per_job then
		return fail("ESLURM_ACCOUNTING_POLICY", class.max_gpus_line, string.format(
			"class %s allows at most %d GPUs per job; %s", job.class, class.max_gpus_per_job, asks(n + before, before)))
	end
	before = acct.gpus and het.owner[acct.gpus.owner] or 0
	if acct.gpus and n + before > acct.gpus.limit then
		return fail("ESLURM_ACCOUNTING_POLICY", acct.gpus.line, string.format(
			"%s may use at most %d GPUs; %s", acct.gpus.owner, acct.gpus.limit, asks(n + before, before)))
	end
	local types = {}
	for typ in pairs(by_type) do
		types[#types + 1] = typ
	end
	table.sort(types)
	for _, typ in ipairs(types) do
		local l = acct.gpus_by_type[typ]
		before = l and het.typed[l.owner .. "\0" .. typ] or 0
		local want = by_type[typ] + before
		if l and want > l.limit then
			if l.limit == 0 then
				return fail("ESLURM_ACCOUNTING_POLICY", l.line, string.format("%s may not use %s GPUs", l.owner, typ))
			end
			return fail("ESLURM_ACCOUNTING_POLICY", l.line, string.format(
				"%s may use at most %d %s GPUs; %s", l.owner, l.limit, typ, asks(want, before)))
		end
	end

	if class.whole_nodes and job.multi_node and job.desc.shared ~= 0 and not job.desc.shared_unknown then
		return fail("ESLURM_ACCOUNTING_POLICY", class.whole_nodes_line, "class " .. job.class ..
			" runs jobs on several nodes on whole nodes only: add --exclusive")
	end
	local rc, msg = check_image(p, job, acct, fail)
	if rc then
		return rc, msg
	end
	het_add(het, job, acct, n, by_type)
	return nil
end

-- apply fills in the job's account, partition, QOS, time limit, requeue flag and switches.
local function apply(p, job)
	local d, class = job.desc, p.classes[job.class]
	local did = {}
	if job.account_from_policy then
		d.account = job.account
		did[#did + 1] = "account=" .. job.account
	end
	if not job.partition then
		d.partition = class.partition
		did[#did + 1] = "partition=" .. class.partition
	end
	if not job.qos then
		d.qos = job.class
		did[#did + 1] = "qos=" .. job.class
	end
	if not job.time and class.default_time > 0 then
		d.time_limit = class.default_time
		did[#did + 1] = "time_limit=" .. string.format("%d", class.default_time)
	end
	if n16(d.requeue) == nil then
		d.requeue = class.requeue and 1 or 0
		did[#did + 1] = "requeue=" .. (class.requeue and "1" or "0")
	end
	if job.multi_node and class.switches > 0 and n32(d.req_switch) == nil then
		d.req_switch = class.switches
		did[#did + 1] = "switches=" .. string.format("%d", class.switches)
	end
	return did
end

-- reject tells the user why (sbatch prints it on stderr) and logs it.
local function reject(job_desc, user, rc, msg)
	slurm.log_info("%s", msg .. " [user " .. user .. ", job name " .. tostring(job_desc.name) .. "]")
	slurm.log_user("%s", msg)
	return rc
end

-- unchecked tells the submitter that the job was not checked, while there is no policy.
local function unchecked(what)
	if state.problem then
		slurm.log_user("%s", "strata: warning: this " .. what .. " was not checked against the cluster's policy: " ..
			state.problem .. "; please tell the cluster's admins")
	end
end

-- classify reads, from d (a job_desc, or the job a change would leave), the account, the
-- partition, the QOS, the class and the time limit the rules look at. It returns nil when
-- the account is not the policy's (the job passes untouched), or the job, or the error code
-- and message of a job without a class.
local function classify(p, d, user)
	local job = { desc = d }
	job.account = d.account
	if job.account == "" then
		job.account = nil
	end
	if not job.account then
		job.account = p.users[user]
		job.account_from_policy = job.account ~= nil
		if not job.account then
			job.account = d.default_account -- Slurm's default for the user
		end
	end
	if not job.account or not p.accounts[job.account] then
		return nil -- not the policy's account: untouched
	end

	job.partition = d.partition
	if job.partition == "" then
		job.partition = nil
	end
	job.qos = d.qos
	if job.qos == "" then
		job.qos = nil
	end
	local comment = d.comment
	local named = type(comment) == "string" and comment:match("strata:class=([%w_%-%.]+)")
	if named then
		job.class, job.class_from, job.class_why = named, "comment", "from --comment"
	elseif job.partition and p.partitions[job.partition] then
		job.class, job.class_from = p.partitions[job.partition], "partition"
		job.class_why = "the class of partition " .. job.partition
	elseif p.default_class then
		job.class, job.class_from, job.class_why = p.default_class, "default", "the default class"
	else
		return nil, code("ESLURM_INVALID_QOS"), "strata: the policy has no default class: choose the class with " ..
			"--comment=strata:class=<name>; the classes are " .. names(p.classes)
	end
	job.time = n32(d.time_limit)
	if d.time_limit == INFINITE then
		job.time = INFINITE
	end
	job.multi_node = multi_node(d)
	return job
end

local function submit(job_desc, submit_uid)
	local p = policy()
	if not p then
		unchecked("job")
		return slurm.SUCCESS
	end
	local user = job_desc.user_name or ("uid " .. tostring(job_desc.user_id))
	local het = het_sums(job_desc, user)
	local job, rc, msg = classify(p, job_desc, user)
	if not job then
		if rc then
			return reject(job_desc, user, rc, msg)
		end
		return slurm.SUCCESS
	end
	rc, msg = check_job(p, job, user, het)
	if rc then
		return reject(job_desc, user, rc, msg)
	end
	local did = apply(p, job)
	if #did > 0 then
		slurm.log_debug("%s", "strata: class " .. job.class .. " (" .. job.class_why .. ") for user " .. user .. ": " ..
			table.concat(did, " "))
	end
	return slurm.SUCCESS
end

-- The fields of a change the checks read, and how Slurm says "not changed" for each: nil for
-- strings (an empty string clears the field), NO_VAL for 32-bit numbers, NO_VAL16 for 16-bit.
local MODIFY_FIELDS = {
	account = "s", partition = "s", qos = "s", comment = "s",
	tres_per_job = "s", tres_per_node = "s", tres_per_socket = "s", tres_per_task = "s",
	time_limit = 32, min_nodes = 32, max_nodes = 32, num_tasks = 32,
	ntasks_per_node = 16, sockets_per_node = 16, shared = 16,
}

-- changed says whether a change sets the field.
local function changed(kind, v)
	if v == nil then
		return false
	end
	if kind == 32 then
		return v ~= NO_VAL
	elseif kind == 16 then
		return v ~= NO_VAL16
	end
	return true
end

-- after returns the job as the change would leave it: each field the change sets, else the
-- job's own (a job record has no task, tasks-per-node, sockets or --exclusive fields, so those
-- count only when the change sets them), and whether the change touches any checked field.
local function after(job_desc, job_rec)
	local out, touched = {}, false
	for k, kind in pairs(MODIFY_FIELDS) do
		local v = job_desc[k]
		if changed(kind, v) then
			out[k], touched = v, true
		else
			out[k] = job_rec[k]
		end
	end
	-- A job record does not say whether the job has whole nodes (--exclusive): the whole-node
	-- rule holds only for a change that says.
	out.shared_unknown = not changed(MODIFY_FIELDS.shared, job_desc.shared)
	return out, touched
end

local function modify(job_desc, job_rec, modify_uid)
	local d, touched = after(job_desc, job_rec)
	if not touched or modify_uid == 0 then
		return slurm.SUCCESS
	end
	local p = policy()
	if not p then
		unchecked("change")
		return slurm.SUCCESS
	end
	local user = job_rec.user_name or ("uid " .. tostring(job_rec.user_id))
	local job, rc, msg = classify(p, d, user)
	if not job then
		if rc then
			return reject({ name = job_rec.name }, user, rc, msg)
		end
		return slurm.SUCCESS
	end
	-- slurmctld's job record gives the owner's uid but not always the name the policy lists
	-- members by; without the name, membership is Slurm's own association check, which the
	-- policy's associations make the same rule.
	job.member_by_slurm = job_rec.user_name == nil
	rc, msg = check_job(p, job, user, { class = {}, owner = {}, typed = {} })
	if rc then
		return reject({ name = tostring(job_rec.name) .. ", a change of job " .. tostring(job_rec.job_id) }, user, rc, msg)
	end
	return slurm.SUCCESS
end

function slurm_job_submit(job_desc, part_list, submit_uid)
	local ok, rc = pcall(submit, job_desc, submit_uid)
	if ok then
		return rc
	end
	slurm.log_error("%s", "strata: job_submit.lua failed, so the job passes unchecked: " .. tostring(rc))
	return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
	local ok, rc = pcall(modify, job_desc, job_rec, modify_uid)
	if ok then
		return rc
	end
	slurm.log_error("%s", "strata: job_submit.lua failed, so the change passes unchecked: " .. tostring(rc))
	return slurm.SUCCESS
end

slurm.log_info("%s", "strata: job_submit.lua loaded; policy data: " .. DATA_FILE)
return slurm.SUCCESS
