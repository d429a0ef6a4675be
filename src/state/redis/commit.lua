-- Compare-and-commit of the shared quota state, with the lease change that goes with it.
-- The decision itself is computed by the pure TypeScript core on the state read at version
-- ARGV[1] of epoch ARGV[2]; this script applies it only if nobody committed since, so replicas
-- never admit on a stale view (zero over-admission), and the counters and the lease table change
-- together. The epoch is a random id written when the state is (re)seeded: checking it too means
-- a state that Redis lost and a replica rebuilt can't be mistaken for the old one at the same
-- version.
--
-- KEYS[1] state hash {v, json, epoch, until}   KEYS[2] leases hash id -> lease JSON
-- KEYS[3] expiry zset id -> ms
-- ARGV[1] expected version   ARGV[2] expected epoch ('' = none)   ARGV[3] new state JSON
-- ARGV[4] mode
--   mode 'state'   : state only
--   mode 'put'     : ARGV[5..] triples (id, lease JSON, expiresAt), zero or more  (admissions)
--   mode 'take'    : ARGV[5..] ids, each must exist                    (completion)
--   mode 'reclaim' : ARGV[5] now, ARGV[6..] ids, each must exist and be expired at now
--   mode 'seed'    : ARGV[5] new epoch, ARGV[6] admissions wait until this time (ms) so every
--                    replica can put its leases back first, ARGV[7..] triples: the whole lease
--                    table, replacing what is there (the state was lost or rolled back)
-- Returns 1 committed, 0 version or epoch moved (re-read and retry), -1 a lease is gone or was
-- extended (re-read), -2 the lease id is taken. Nothing is written unless it returns 1.
local cur = redis.call('HMGET', KEYS[1], 'v', 'epoch')
local v = tonumber(cur[1] or '0')
if v ~= tonumber(ARGV[1]) or (cur[2] or '') ~= ARGV[2] then return 0 end
local mode = ARGV[4]
if mode == 'put' then
  for i = 5, #ARGV, 3 do
    if redis.call('HEXISTS', KEYS[2], ARGV[i]) == 1 then return -2 end
  end
elseif mode == 'take' then
  for i = 5, #ARGV do
    if redis.call('HEXISTS', KEYS[2], ARGV[i]) == 0 then return -1 end
  end
elseif mode == 'reclaim' then
  local now = tonumber(ARGV[5])
  for i = 6, #ARGV do
    local exp = redis.call('ZSCORE', KEYS[3], ARGV[i])
    if not exp or tonumber(exp) > now then return -1 end
  end
end
redis.call('HSET', KEYS[1], 'v', v + 1, 'json', ARGV[3])
if mode == 'put' or mode == 'seed' then
  local first = 5
  if mode == 'seed' then
    redis.call('HSET', KEYS[1], 'epoch', ARGV[5], 'until', ARGV[6])
    redis.call('DEL', KEYS[2], KEYS[3])
    first = 7
  end
  for i = first, #ARGV, 3 do
    redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
    redis.call('ZADD', KEYS[3], ARGV[i + 2], ARGV[i])
  end
elseif mode == 'take' or mode == 'reclaim' then
  local first = (mode == 'take') and 5 or 6
  for i = first, #ARGV do
    redis.call('HDEL', KEYS[2], ARGV[i])
    redis.call('ZREM', KEYS[3], ARGV[i])
  end
end
return 1
