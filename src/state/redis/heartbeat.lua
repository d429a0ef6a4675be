-- Extend a lease: its expiry only moves later. Returns the lease JSON and its expiry, false if
-- the id is unknown, or -1 if the state's epoch isn't the caller's (Redis lost the state, or a
-- replica rebuilt it): the caller restores its leases first, so a lease Redis lost is never
-- reported as gone to its holder.
-- KEYS[1] leases hash   KEYS[2] expiry zset   KEYS[3] state hash
-- ARGV[1] id   ARGV[2] new expiresAt (ms)   ARGV[3] the caller's epoch
if redis.call('HGET', KEYS[3], 'epoch') ~= ARGV[3] then return -1 end
local lease = redis.call('HGET', KEYS[1], ARGV[1])
if not lease then return false end
redis.call('ZADD', KEYS[2], 'GT', ARGV[2], ARGV[1])
return {lease, redis.call('ZSCORE', KEYS[2], ARGV[1])}
