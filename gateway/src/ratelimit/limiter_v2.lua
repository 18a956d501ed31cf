-- runaii rate limiter, version 2. Two token buckets per API key, one for requests and one for tokens,
-- each refilling continuously up to its per-minute limit. Time is Redis' own clock, so replicas with
-- skewed clocks still share one budget. Version 2 lets a replica take several requests at once (a
-- slice, admitted from its memory) and give back those it did not use.
--
-- KEYS[1]  the requests bucket      KEYS[2]  the tokens bucket (same hash slot: `{key id}`)
-- ARGV[1]  "admit": give back ARGV[6] requests, take ARGV[4] tokens (of requests that ended since),
--                   then up to ARGV[5] requests (at least one) when both buckets allow one
--          "spend": give back ARGV[6] requests and take ARGV[4] tokens after requests ended (the bucket
--                   may go into debt, which holds back the key's next requests until it refills)
-- ARGV[2]  requests per minute      ARGV[3]  tokens per minute      ARGV[4]  tokens to spend (0: none)
-- ARGV[5]  requests wanted (admit)  ARGV[6]  requests given back, taken earlier and not used (0: none)
--
-- Returns { requests taken (0 when refused), requests left, tokens left, ms until requests are full,
-- ms until tokens are full, ms to wait before a retry can pass (0 when taken) }.

local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local mode, rpm, tpm = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local spend, want, give = tonumber(ARGV[4]), math.max(1, tonumber(ARGV[5])), tonumber(ARGV[6])
if mode ~= 'admit' and mode ~= 'spend' then
  return redis.error_reply('unknown mode')
end

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
local taken, wait = 0, 0
local requests_changed = false

if give > 0 then
  requests = math.min(rpm, requests + give)
  requests_changed = true
end

if spend > 0 then
  tokens = tokens - spend
  save(KEYS[2], tokens, tpm)
end

if mode == 'admit' then
  if requests < 1 then
    wait = math.ceil((1 - requests) * 60000 / rpm)
  elseif tokens < 1 then
    wait = math.ceil((1 - tokens) * 60000 / tpm)
  else
    taken = math.min(want, math.floor(requests))
    requests = requests - taken
    requests_changed = true
  end
end

if requests_changed then
  save(KEYS[1], requests, rpm)
end

return { taken, math.floor(requests), math.floor(tokens), until_full(requests, rpm), until_full(tokens, tpm), wait }
