-- Shared by the wrk scripts of scripts/bench: setup() numbers the threads
-- (thread_no, to seed each one's random numbers apart), run_id() names a
-- thread's run for the keys it makes unique, and done() prints one
-- machine-readable line that scripts/bench parses.
--   rps      completed requests per second
--   p50/p99  latency percentiles, milliseconds
--   non2xx   responses with a status outside 2xx/3xx
--   sockerr  connect + read + write errors and timeouts

local counter = 0
function setup(thread)
    counter = counter + 1
    thread:set("thread_no", counter)
end

-- 16 hex digits from /dev/urandom, drawn once per thread: the warm-up
-- run and the measured run never make the same key
function run_id()
    local f = assert(io.open("/dev/urandom", "rb"))
    local bytes = f:read(8)
    f:close()
    return (bytes:gsub(".", function(c)
        return string.format("%02x", c:byte())
    end))
end

function done(summary, latency, requests)
    local e = summary.errors
    io.write(string.format(
        "BENCH_RESULT requests=%d rps=%.1f p50=%.3f p99=%.3f " ..
        "non2xx=%d sockerr=%d\n",
        summary.requests,
        summary.requests / (summary.duration / 1e6),
        latency:percentile(50) / 1000,
        latency:percentile(99) / 1000,
        e.status, e.connect + e.read + e.write + e.timeout))
end
