-- wrk script: PUT /api/v1/Counterparties/accounts, a whole update of a
-- random bank account of the bench merchant (scripts/bench.d/seed.sql:
-- 89000000-0000-4000-8000-00000000NNNN, N = 1..1000), the body alternating
-- between two consistent field sets. The bearer token (with the merchantId)
-- and the Content-Type come from wrk -H. The same bodies as
-- counterparty-account.sql, which pgbench runs as the reference.
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(dir .. "report.lua")

local sets = {
    '"account":1,"counterpartyType":2,"accountType":1,"bankCode":"058",'
    .. '"bankName":"Guaranty Trust Bank","accountNumber":"0123456789",'
    .. '"accountName":"Bench A","iban":"","swiftCode":"GTBINGLA",'
    .. '"bankAddress":"Plot 635 Akin Adesola Street, Lagos",'
    .. '"routingNumber":"058152036"',
    '"account":2,"counterpartyType":2,"accountType":3,'
    .. '"bankCode":"10070000","bankName":"Deutsche Bank",'
    .. '"accountNumber":"0123456789","accountName":"Bench B",'
    .. '"iban":"DE65100700000123456789","swiftCode":"DEUTDEBBXXX",'
    .. '"bankAddress":"Otto-Suhr-Allee 6-16, 10585 Berlin",'
    .. '"routingNumber":null'
}

local reqs, n, turn = { {}, {} }, 1000, 0
function init(args)
    math.randomseed(os.time() * 1000 + (thread_no or 0))
    for s = 1, 2 do
        for i = 1, n do
            reqs[s][i] = wrk.format("PUT", "/api/v1/Counterparties/accounts",
                nil, string.format(
                    '{"id":"89000000-0000-4000-8000-%012d",%s}', i, sets[s]))
        end
    end
end

function request()
    turn = turn % 2 + 1
    return reqs[turn][math.random(1, n)]
end
