-- wrk script: GET /tms/delivery-orders/{id}, the id picked at random per
-- request from the file given as the script's first argument (one uuid a
-- line). The tenant headers come from wrk -H.
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(dir .. "report.lua")

local reqs, n = {}, 0
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
end

function request()
    return reqs[math.random(1, n)]
end
