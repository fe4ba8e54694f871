-- wrk script: PATCH /tms/delivery-orders/{id}/assign/{driverId}
-- ?shippingFee=, on the assign pairs of the bench tenant in GH
-- (scripts/bench.d/seed.sql): each request takes an order at random and
-- names one of its two drivers at random (the other: a reassign, the
-- driver taken and the first freed; the one it has: its fee replaced),
-- with a fee of two decimals. Every request is 200 by construction. The
-- file given as the script's first argument has one "order driverA
-- driverB" line per order; the tenant headers come from wrk -H. The same
-- choices as tms-assign.sql, which pgbench runs as the reference.
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(dir .. "report.lua")

local pairs_, n = {}, 0
function init(args)
    math.randomseed(os.time() * 1000 + (thread_no or 0))
    local f = assert(io.open(args[1], "r"))
    for line in f:lines() do
        local o, a, b = line:match("^(%S+) (%S+) (%S+)$")
        if o then
            n = n + 1
            pairs_[n] = { o, a, b }
        end
    end
    f:close()
    assert(n > 0, "no pairs in " .. args[1])
end

function request()
    local p = pairs_[math.random(1, n)]
    local fee = math.random(100, 99999)
    return wrk.format("PATCH", string.format(
        "/tms/delivery-orders/%s/assign/%s?shippingFee=%d.%02d",
        p[1], p[1 + math.random(1, 2)], math.floor(fee / 100), fee % 100))
end
