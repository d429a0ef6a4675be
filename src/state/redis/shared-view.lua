-- One router's round of the shared in-flight view (src/state/shared-view.ts).
-- KEYS[i]: one hash per backend, field = router id, value = "inFlight held expiresAt".
-- ARGV: routerId, nowMs, ttlMs, then per key: inFlight, cap (-1 = uncapped), want, and the
-- allowance the router enforces until this round's answer reaches it.
-- Returns per key: { others' in-flight, this router's allowance (-1 = uncapped), 1 if this
-- router's own field was there (0: first round, or the data was lost: FLUSHDB, a restart) }.
--
-- Allowance invariant: a router dispatches only while its in-flight is below the allowance it
-- enforces, and "held" = max(in-flight, new allowance, allowance still enforced) at its last round
-- (an allowance that shrinks is only given up once the router has applied the smaller one); an allowance is at most the cap minus
-- what every other live router holds, so together they never exceed the cap. Fields of routers
-- that have not come back within ttlMs are dropped (their capacity returns).
local id, now, ttl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local out = {}
for i, key in ipairs(KEYS) do
  local base = 3 + (i - 1) * 4
  local inflight = tonumber(ARGV[base + 1])
  local cap = tonumber(ARGV[base + 2])
  local want = tonumber(ARGV[base + 3])
  local enforced = tonumber(ARGV[base + 4])
  local fields = redis.call('HGETALL', key)
  local othersIn, othersHeld, mine = 0, 0, 0
  for j = 1, #fields, 2 do
    if fields[j] == id then
      mine = 1
    else
      local a, b, c = string.match(fields[j + 1], '^(%-?%d+) (%-?%d+) (%d+)$')
      if a == nil or tonumber(c) < now then
        redis.call('HDEL', key, fields[j])
      else
        othersIn = othersIn + tonumber(a)
        othersHeld = othersHeld + math.max(tonumber(a), tonumber(b))
      end
    end
  end
  local allowance = -1
  if cap >= 0 then
    allowance = math.max(0, math.min(want, cap - othersHeld))
  end
  redis.call('HSET', key, id, inflight .. ' ' .. math.max(allowance, enforced) .. ' ' .. (now + ttl))
  redis.call('PEXPIRE', key, ttl * 4)
  out[i] = { othersIn, allowance, mine }
end
return out
