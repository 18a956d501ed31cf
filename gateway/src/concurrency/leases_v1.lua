-- A tenant's requests in flight, as leases: KEYS[1] is a sorted set of lease ids, each scored with its
-- expiry in milliseconds of Redis's own clock (so replicas' clocks never matter).
-- ARGV[1]: 'take', 'renew' or 'give'; ARGV[2]: the lease id; ARGV[3]: lease length in ms; ARGV[4]: the cap.
-- 'take' drops lapsed leases and adds this one if fewer than the cap remain: 1 taken, 0 refused.
-- 'renew' pushes the lease's expiry out (adding it again if it lapsed meanwhile); 'give' removes it.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local mode, id, lease = ARGV[1], ARGV[2], tonumber(ARGV[3])
if mode == 'give' then
  redis.call('ZREM', KEYS[1], id)
  return 1
end
if mode == 'take' then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
  if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then
    return 0
  end
end
redis.call('ZADD', KEYS[1], now + lease, id)
redis.call('PEXPIRE', KEYS[1], lease)
return 1
