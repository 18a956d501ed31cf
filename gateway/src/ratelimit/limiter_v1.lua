-- runaii rate limiter, version 1. Two token buckets per API key, one for requests and one for tokens,
-- each refilling continuously up to its per-minute limit. Time is Redis' own clock, so replicas with
-- skewed clocks still share one budget.
--
-- KEYS[1]  the requests bucket      KEYS[2]  the tokens bucket (same hash slot: `{key id}`)
-- ARGV[1]  "admit": take ARGV[4] tokens (of requests that ended since), then one request when both
--                   buckets allow it
--          "spend": take ARGV[4] tokens after requests ended (the bucket may go into debt, which
--                   holds back the key's next requests until it refills)
-- ARGV[2]  requests per minute      ARGV[3]  tokens per minute      ARGV[4]  tokens to spend (0: none)
--
-- Returns { allowed (1/0), requests left, tokens left, ms until requests are full, ms until tokens are
-- full, ms to wait before a retry can pass (0 when allowed) }.

local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local mode, rpm, tpm, spend = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])

local function level(key, limit)
  local stored = redis.call('HMGET', key, 'level', 'at')
  local value, at = tonumber(stored[1]), tonumber(stored[2])
  if value == nil or at == nil then
    return limit
  end
  return math.min(limit, value + math.max(0, now - at) * limit / 60000)
end

local function until_full(value, limit)
  return math.ceil((limit - value) * 60000 / limit)
end

local function save(key, value, limit)
  redis.call('HSET', key, 'level', tostring(value), 'at', now)
  -- A missing bucket reads as full, so it may expire once it would be full again.
  redis.call('PEXPIRE', key, until_full(value, limit) + 1000)
end

local requests = level(KEYS[1], rpm)
local tokens = level(KEYS[2], tpm)
local allowed, wait = 1, 0

if spend > 0 and (mode == 'admit' or mode == 'spend') then
  tokens = tokens - spend
  save(KEYS[2], tokens, tpm)
end

if mode == 'admit' then
  if requests < 1 then
    allowed, wait = 0, math.ceil((1 - requests) * 60000 / rpm)
  elseif tokens < 1 then
    allowed, wait = 0, math.ceil((1 - tokens) * 60000 / tpm)
  else
    requests = requests - 1
    save(KEYS[1], requests, rpm)
  end
elseif mode ~= 'spend' then
  return redis.error_reply('unknown mode')
end

return { allowed, math.floor(requests), math.floor(tokens), until_full(requests, rpm), until_full(tokens, tpm), wait }
