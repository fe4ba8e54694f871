-- wrk script: POST /api/v1/Identity/verification/business-credit-bureau
-- for one of the 100 RC numbers the bureau answered for tenant-bench
-- (scripts/bench.d/seed.sql: BENCH001 .. BENCH100), so that each request
-- is answered from the record (the newest answer looked up, the reuse
-- recorded) without calling the bureau; the customer name alternates
-- between the company's name in other case and spacing (VERIFIED) and
-- another name (NAME_MISMATCH). The bearer token and the Content-Type
-- come from wrk -H. identity-cached.sql, which pgbench runs as the
-- reference, is the same statement.
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(dir .. "report.lua")

local path = "/api/v1/Identity/verification/business-credit-bureau"
local reqs, n, turn = { {}, {} }, 100, 0
function init(args)
    math.randomseed(os.time() * 1000 + (thread_no or 0))
    for i = 1, n do
        reqs[1][i] = wrk.format("POST", path, nil, string.format(
            '{"rc_number":"BENCH%03d",'
            .. '"customer_name":"BENCH  company %d limited"}', i, i))
        reqs[2][i] = wrk.format("POST", path, nil, string.format(
            '{"companyNumber":"BENCH%03d",'
            .. '"customer_name":"Another Company"}', i))
    end
end

function request()
    turn = turn % 2 + 1
    return reqs[turn][math.random(1, n)]
end
