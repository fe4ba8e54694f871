-- wrk script: POST /api/v1/Counterparties/groups, each request a new group
-- of three consecutive counterparties of the bench merchant
-- (scripts/bench.d/seed.sql: 88000000-0000-4000-8000-00000000NNNN), its
-- name unique by random bytes each thread draws (so the warm-up run and
-- the measured run never make the same name) and a counter. The bearer
-- token (with the merchantId) and the Content-Type come from wrk -H.
-- Shaped like counterparty-group.sql's bodies.
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(dir .. "report.lua")

local run, count = "", 0
local member = '{"counterpartyId":"88000000-0000-4000-8000-%012d",'
               .. '"counterpartyName":"Bench member"}'
local body = '{"name":"bench %s %d","description":"Bench group",'
             .. '"members":[' .. member .. ',' .. member .. ',' .. member
             .. ']}'

function init(args)
    run = run_id()
    math.randomseed(os.time() * 1000 + (thread_no or 0))
end

function request()
    local m = math.random(1, 998)
    count = count + 1
    return wrk.format("POST", "/api/v1/Counterparties/groups", nil,
        string.format(body, run, count, m, m + 1, m + 2))
end
