-- wrk script: POST /api/webhooks/public/bench/events, the same event every
-- time (scripts/bench stores it before measuring): each answer is 200
-- {"duplicate": true}, from the event's "stored" key in Redis. The
-- Content-Type comes from wrk -H.
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(dir .. "report.lua")

local req
function init(args)
    req = wrk.format("POST", "/api/webhooks/public/bench/events", nil,
        '{"id":"evt-bench-duplicate","type":"payment.succeeded",'
        .. '"amount":1250,"currency":"NGN","reference":"T-100245",'
        .. '"customer":{"id":"c-1","email":"ada@example.com"}}')
end

function request()
    return req
end
