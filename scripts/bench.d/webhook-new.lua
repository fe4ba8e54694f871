-- wrk script: POST /api/webhooks/public/bench/events, each request a new
-- event: its body's "id" (the event key) unique by random bytes each
-- thread draws (so the warm-up run and the measured run never repeat one)
-- and a counter. The Content-Type comes from wrk -H. The same body as
-- webhook-new.sql, which pgbench runs as the reference.
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(dir .. "report.lua")

local run, count = "", 0
local body = '{"id":"evt-%s-%d","type":"payment.succeeded",'
             .. '"amount":1250,"currency":"NGN","reference":"T-100245",'
             .. '"customer":{"id":"c-1","email":"ada@example.com"}}'

function init(args)
    run = run_id()
end

function request()
    count = count + 1
    return wrk.format("POST", "/api/webhooks/public/bench/events", nil,
        string.format(body, run, count))
end
