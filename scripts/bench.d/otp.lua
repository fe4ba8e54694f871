-- wrk script: GET /validate-otp/{random 6-digit code}.
-- The tenant headers come from wrk -H. No code is stored for the bench
-- tenant, so nearly every answer is 404: what is measured is the Redis round
-- trip of the atomic attempts-and-delete Lua script. Each thread prebuilds
-- a pool of requests so that Lua string work stays off the hot path.
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(dir .. "report.lua")

local reqs, n = {}, 0
function init(args)
    math.randomseed(os.time() * 1000 + (thread_no or 0))
    n = 20000
    for i = 1, n do
        reqs[i] = wrk.format("GET",
            string.format("/validate-otp/%06d", math.random(0, 999999)))
    end
end

function request()
    return reqs[math.random(1, n)]
end
