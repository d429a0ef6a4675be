-- Compare-and-commit of the shared quota state, with the lease change that goes with it.
-- The decision itself is computed by the pure TypeScript core on the state read at version
-- ARGV[1]; this script applies it only if nobody committed since, so replicas never admit on a
-- stale view (zero over-admission), and the counters and the lease table change together.
--
-- KEYS[1] state hash {v, json}   KEYS[2] leases hash id -> lease JSON   KEYS[3] expiry zset id -> ms
-- ARGV[1] expected version   ARGV[2] new state JSON   ARGV[3] mode
--   mode 'state'   : state only
--   mode 'put'     : ARGV[4..] triples (id, lease JSON, expiresAt), zero or more  (admissions)
--   mode 'take'    : ARGV[4..] ids, each must exist                    (completion)
--   mode 'reclaim' : ARGV[4] now, ARGV[5..] ids, each must exist and be expired at now
-- Returns 1 committed, 0 version moved (re-read and retry), -1 a lease is gone or was extended
-- (re-read), -2 the lease id is taken. Nothing is written unless it returns 1.
local v = tonumber(redis.call('HGET', KEYS[1], 'v') or '0')
if v ~= tonumber(ARGV[1]) then return 0 end
local mode = ARGV[3]
if mode == 'put' then
  for i = 4, #ARGV, 3 do
    if redis.call('HEXISTS', KEYS[2], ARGV[i]) == 1 then return -2 end
  end
elseif mode == 'take' then
  for i = 4, #ARGV do
    if redis.call('HEXISTS', KEYS[2], ARGV[i]) == 0 then return -1 end
  end
elseif mode == 'reclaim' then
  local now = tonumber(ARGV[4])
  for i = 5, #ARGV do
    local exp = redis.call('ZSCORE', KEYS[3], ARGV[i])
    if not exp or tonumber(exp) > now then return -1 end
  end
end
redis.call('HSET', KEYS[1], 'v', v + 1, 'json', ARGV[2])
if mode == 'put' then
  for i = 4, #ARGV, 3 do
    redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
    redis.call('ZADD', KEYS[3], ARGV[i + 2], ARGV[i])
  end
elseif mode == 'take' or mode == 'reclaim' then
  local first = (mode == 'take') and 4 or 5
  for i = first, #ARGV do
    redis.call('HDEL', KEYS[2], ARGV[i])
    redis.call('ZREM', KEYS[3], ARGV[i])
  end
end
return 1
