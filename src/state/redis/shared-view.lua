-- One router's round of the shared in-flight view (src/state/shared-view.ts).
-- KEYS[1..n]: one hash per backend, field = router id, value = "inFlight held expiresAt".
-- KEYS[n+1..2n]: per backend, the routers that take hand-overs: field = router id, value =
-- "want granted since" (the allowance it last asked for; slots handed to it on this backend so
-- far; when its oldest request waiting there began to wait, -1: none told).
-- ARGV: routerId, nowMs, ttlMs, the hand-over channel, then per key: inFlight, cap (-1 =
-- uncapped), want, the allowance the router enforces until this round's answer reaches it, the
-- hand-overs it has taken there (-1: it takes none), the backend's name, and how long its oldest
-- request waiting there has waited in ms (0: none).
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
-- last ask is not met, a slot at a time: longest waiting first (one that told no wait last), each
-- once before any twice, then most unmet, then by id (shared-view-book.ts, the twin). Their held
-- grows here and one message "router granted name" each on the channel tells them, so they need
-- not wait for their own round.
-- Hand-overs a router has not taken yet (granted - taken) count in its held at its next round.
local id, now, ttl, channel = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local n = #KEYS / 2
local out = {}
for i = 1, n do
  local key, gkey = KEYS[i], KEYS[n + i]
  local base = 4 + (i - 1) * 7
  local inflight = tonumber(ARGV[base + 1])
  local cap = tonumber(ARGV[base + 2])
  local want = tonumber(ARGV[base + 3])
  local enforced = tonumber(ARGV[base + 4])
  local taken = tonumber(ARGV[base + 5])
  local name = ARGV[base + 6]
  local waited = tonumber(ARGV[base + 7])
  local since = -1
  if waited > 0 then
    since = math.floor(now - waited)
  end
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
      granted = tonumber(string.match(g, '^%d+ (%d+)')) or 0
    end
  end
  local held = math.max(allowance, enforced + math.max(0, granted - math.max(taken, 0)))
  redis.call('HSET', key, id, inflight .. ' ' .. held .. ' ' .. (now + ttl))
  if taken >= 0 and cap >= 0 then
    redis.call('HSET', gkey, id, want .. ' ' .. granted .. ' ' .. since)
  else
    redis.call('HDEL', gkey, id)
  end
  if cap >= 0 then
    local free = cap - othersHeld - math.max(inflight, held)
    if free > 0 then
      -- The routers waiting there: { id, want, granted, since }, and the slots given each.
      local cands, given, order = {}, {}, {}
      local waits = redis.call('HGETALL', gkey)
      for j = 1, #waits, 2 do
        local r = waits[j]
        local f = live[r]
        if r ~= id and f then
          local w, g, s = string.match(waits[j + 1], '^(%d+) (%d+) ?(%-?%d*)$')
          if w then
            s = tonumber(s) or -1
            cands[#cands + 1] = { r, tonumber(w), tonumber(g), s }
          end
        end
      end
      while free > 0 do
        local best, bestServed, bestSince, bestUnmet = nil, 0, 0, 0
        for _, c in ipairs(cands) do
          local r = c[1]
          local f = live[r]
          local served = given[r] or 0
          local unmet = c[2] - math.max(f[1], f[2]) - served
          if unmet > 0 then
            local first = best == nil
            if not first then
              if served ~= bestServed then
                first = served < bestServed
              elseif c[4] ~= bestSince then
                first = bestSince < 0 or (c[4] >= 0 and c[4] < bestSince)
              elseif unmet ~= bestUnmet then
                first = unmet > bestUnmet
              else
                first = r < best[1]
              end
            end
            if first then
              best, bestServed, bestSince, bestUnmet = c, served, c[4], unmet
            end
          end
        end
        if best == nil then
          break
        end
        if bestServed == 0 then
          order[#order + 1] = best
        end
        given[best[1]] = bestServed + 1
        free = free - 1
      end
      for _, c in ipairs(order) do
        local r = c[1]
        local give = given[r]
        local f = live[r]
        f[2] = math.max(f[1], f[2]) + give
        redis.call('HSET', key, r, f[1] .. ' ' .. f[2] .. ' ' .. f[3])
        redis.call('HSET', gkey, r, c[2] .. ' ' .. (c[3] + give) .. ' ' .. c[4])
        redis.call('PUBLISH', channel, r .. ' ' .. (c[3] + give) .. ' ' .. name)
      end
    end
  end
  redis.call('PEXPIRE', key, ttl * 4)
  redis.call('PEXPIRE', gkey, ttl * 4)
  out[i] = { othersIn, allowance, mine, granted }
end
return out
