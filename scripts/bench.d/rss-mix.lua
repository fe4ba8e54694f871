-- wrk script of the RSS check of scripts/bench: GET /validate-otp/{random
-- code} and GET /tms/delivery-orders/{random id} in turn (the ids from the
-- file given as the script's first argument), each thread stopping once it
-- has its share of answers (the second argument) and writing the file
-- named by the third argument and its thread number: wrk itself runs for
-- its -d, so scripts/bench waits for every thread's file, then stops it
-- with SIGINT. The tenant headers come from wrk -H. Prints the BENCH_RESULT
-- line of report.lua and BENCH_BAD: the answers other than 200 (delivery
-- orders) and 404 (OTP, no code stored).
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(dir .. "report.lua")

local threads = {}
local report_setup, report_done = setup, done
function setup(thread)
    report_setup(thread)
    threads[#threads + 1] = thread
end

local reqs, n, turn = {}, 0, 0
local limit, seen, marker = 0, 0, nil
bad = 0
function init(args)
    math.randomseed(os.time() * 1000 + (thread_no or 0))
    local f = assert(io.open(args[1], "r"))
    for id in f:lines() do
        if id ~= "" then
            n = n + 1
            reqs[n] = wrk.format("GET", "/tms/delivery-orders/" .. id)
        end
    end
    f:close()
    assert(n > 0, "no ids in " .. args[1])
    limit = assert(tonumber(args[2]), "no count of answers")
    marker = assert(args[3], "no file to mark the end") .. "." .. thread_no
end

function request()
    turn = turn + 1
    if turn % 2 == 0 then
        return reqs[math.random(1, n)]
    end
    return wrk.format("GET",
        string.format("/validate-otp/%06d", math.random(0, 999999)))
end

function response(status, headers, body)
    seen = seen + 1
    if status ~= 200 and status ~= 404 then
        bad = bad + 1
    end
    if seen == limit then
        local f = assert(io.open(marker, "w"))
        f:close()
        wrk.thread:stop()
    end
end

function done(summary, latency, requests)
    local total = 0
    for _, t in ipairs(threads) do
        total = total + (t:get("bad") or 0)
    end
    report_done(summary, latency, requests)
    io.write(string.format("BENCH_BAD bad=%d\n", total))
end
