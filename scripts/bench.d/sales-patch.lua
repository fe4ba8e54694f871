-- wrk script: PATCH /sales/transactions, each request a new payment of
-- 1.00 to 99.99 on one of the 100 bench sales at random
-- (scripts/bench.d/seed.sql: b5000000-0000-4000-8000-000000000NNN, whose
-- totalAmount never fills up), its transactionReference unique by random
-- bytes each thread draws (so the warm-up run and the measured run never
-- repeat one) and a counter. The bearer token of tenant-bench and the
-- Content-Type come from wrk -H. The same bodies as sales-patch.sql,
-- which pgbench runs as the reference.
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(dir .. "report.lua")

local run, count = "", 0
local body = '{"saleId":"b5000000-0000-4000-8000-%012d",'
             .. '"transactionReference":"bench-%s-%d",'
             .. '"amount":%d.%02d,"paymentMethod":"QR"}'

function init(args)
    run = run_id()
    math.randomseed(os.time() * 1000 + (thread_no or 0))
end

function request()
    local cents = math.random(100, 9999)
    count = count + 1
    return wrk.format("PATCH", "/sales/transactions", nil,
        string.format(body, math.random(1, 100), run, count,
                      math.floor(cents / 100), cents % 100))
end
