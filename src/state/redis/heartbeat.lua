-- Extend a lease: its expiry only moves later. Returns the lease JSON, or false if unknown.
-- KEYS[1] leases hash   KEYS[2] expiry zset   ARGV[1] id   ARGV[2] new expiresAt (ms)
local lease = redis.call('HGET', KEYS[1], ARGV[1])
if not lease then return false end
redis.call('ZADD', KEYS[2], 'GT', ARGV[2], ARGV[1])
return {lease, redis.call('ZSCORE', KEYS[2], ARGV[1])}
