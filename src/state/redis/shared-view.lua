-- One router's round of the shared in-flight view (src/state/shared-view.ts).
-- KEYS[1..n]: one hash per backend, field = router id, value = "inFlight held expiresAt".
-- KEYS[n+1..2n]: per backend, the routers that take hand-overs: field = router id, value =
-- "want granted" (the allowance it last asked for; slots handed to it on this backend so far).
-- ARGV: routerId, nowMs, ttlMs, the hand-over channel, then per key: inFlight, cap (-1 =
-- uncapped), want, the allowance the router enforces until this round's answer reaches it, the
-- hand-overs it has taken there (-1: it takes none), and the backend's name.
-- Returns per key: { others' in-flight, this router's allowance (-1 = uncapped), 1 if this
-- router's own field was there (0: first round, or the data was lost: FLUSHDB, a restart),
-- slots handed to this router on this backend so far }.
--
-- Allowance invariant: a router dispatches only while its in-flight is below the allowance it
-- enforces, and "held" = max(in-flight, new allowance, allowance still enforced) at its last round
-- (an allowance that shrinks is only given up once the router has applied the smaller one); an allowance is at most the cap minus
-- what every other live router holds, so together they never exceed the cap. Fields of routers
-- that have not come back within ttlMs are dropped (their capacity returns).
--
-- Hand-over: capacity left free after this router's allowance goes at once to the routers whose
-- last ask is not met (most unmet first): their held grows here and a message
-- "router granted name" on the channel tells them, so they need not wait for their own round.
-- Hand-overs a router has not taken yet (granted - taken) count in its held at its next round.
local id, now, ttl, channel = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local n = #KEYS / 2
local out = {}
for i = 1, n do
  local key, gkey = KEYS[i], KEYS[n + i]
  local base = 4 + (i - 1) * 6
  local inflight = tonumber(ARGV[base + 1])
  local cap = tonumber(ARGV[base + 2])
  local want = tonumber(ARGV[base + 3])
  local enforced = tonumber(ARGV[base + 4])
  local taken = tonumber(ARGV[base + 5])
  local name = ARGV[base + 6]
  local fields = redis.call('HGETALL', key)
  local othersIn, othersHeld, mine = 0, 0, 0
  local live = {}
  for j = 1, #fields, 2 do
    if fields[j] == id then
      mine = 1
    else
      local a, b, c = string.match(fields[j + 1], '^(%-?%d+) (%-?%d+) (%d+)$')
      if a == nil or tonumber(c) < now then
        redis.call('HDEL', key, fields[j])
        redis.call('HDEL', gkey, fields[j])
      else
        live[fields[j]] = { tonumber(a), tonumber(b), c }
        othersIn = othersIn + tonumber(a)
        othersHeld = othersHeld + math.max(tonumber(a), tonumber(b))
      end
    end
  end
  local allowance = -1
  if cap >= 0 then
    allowance = math.max(0, math.min(want, cap - othersHeld))
  end
  local granted = 0
  if taken >= 0 then
    local g = redis.call('HGET', gkey, id)
    if g then
      granted = tonumber(string.match(g, ' (%d+)$')) or 0
    end
  end
  local held = math.max(allowance, enforced + math.max(0, granted - math.max(taken, 0)))
  redis.call('HSET', key, id, inflight .. ' ' .. held .. ' ' .. (now + ttl))
  if taken >= 0 and cap >= 0 then
    redis.call('HSET', gkey, id, want .. ' ' .. granted)
  else
    redis.call('HDEL', gkey, id)
  end
  if cap >= 0 then
    local free = cap - othersHeld - math.max(inflight, held)
    while free > 0 do
      local best, bestUnmet, bestWant, bestGranted = nil, 0, 0, 0
      local waits = redis.call('HGETALL', gkey)
      for j = 1, #waits, 2 do
        local r = waits[j]
        local f = live[r]
        if r ~= id and f then
          local w, g = string.match(waits[j + 1], '^(%d+) (%d+)$')
          if w then
            local unmet = tonumber(w) - math.max(f[1], f[2])
            if unmet > bestUnmet or (unmet == bestUnmet and unmet > 0 and r < best) then
              best, bestUnmet, bestWant, bestGranted = r, unmet, tonumber(w), tonumber(g)
            end
          end
        end
      end
      if best == nil then
        break
      end
      local give = math.min(free, bestUnmet)
      local f = live[best]
      f[2] = math.max(f[1], f[2]) + give
      redis.call('HSET', key, best, f[1] .. ' ' .. f[2] .. ' ' .. f[3])
      redis.call('HSET', gkey, best, bestWant .. ' ' .. (bestGranted + give))
      redis.call('PUBLISH', channel, best .. ' ' .. (bestGranted + give) .. ' ' .. name)
      free = free - give
    end
  end
  redis.call('PEXPIRE', key, ttl * 4)
  redis.call('PEXPIRE', gkey, ttl * 4)
  out[i] = { othersIn, allowance, mine, granted }
end
return out
