"""The Lua scripts that make claims, releases and broadcasts atomic across files and server instances.

Time comes from the Redis server (TIME), so instances with skewed clocks still agree on expiry.

Every script is called with a fresh request key as its last key. The client retries a command whose reply was lost
(a dropped connection, a timeout), and Redis may already have run it: the script then returns the stored result of
that first run instead of running again, so a lost reply never duplicates a change or turns a release into "not held".
"""

from __future__ import annotations

# How long a result stays replayable: far beyond the client's retries (a few, each bounded by the command timeout).
REPLAY_WINDOW_MS = 60_000

# Acting in a session marks the agent present, in the same round trip (the presence zset and its TTL).
_PRESENT = """
local function present(key, agent, now, ttl)
  redis.call('ZADD', key, now, agent)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - ttl)
  redis.call('PEXPIRE', key, math.max(ttl, 1))
end
local function clock()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
"""


def _replayable(body: str) -> str:
    """Wrap ``body`` (which returns a result) so that a rerun with the same request key returns the first result."""
    return f"""{_PRESENT}
local request = KEYS[#KEYS]
local done = redis.call('GET', request)
if done then
  return cjson.decode(done)
end
local function run()
{body}
end
local result = run()
redis.call('SET', request, cjson.encode(result), 'PX', {REPLAY_WINDOW_MS})
return result
"""


# KEYS: claim index (zset path -> expiry ms), fencing counters (hash path -> n), presence (zset agent -> seen ms),
# the session's life, one claim hash per path, the request key.
# ARGV: agent, operation, ttl ms, retention ms, presence ttl ms, then the paths in KEYS order.
# Returns {-1} when the session has no life (its state is new or was lost: see cursors), {0, now, {path, holder,
# operation, expires_ms}...} on conflict, else {1, now, expires_ms, token...}.
CLAIM = _replayable("""
local life = redis.call('GET', KEYS[4])
if not life then
  return {-1}
end
local now = clock()
local agent, operation = ARGV[1], ARGV[2]
local ttl, retention = tonumber(ARGV[3]), tonumber(ARGV[4])
present(KEYS[3], agent, now, tonumber(ARGV[5]))
local n = #KEYS - 5
local result = {0, now}
for i = 1, n do
  local held = redis.call('HMGET', KEYS[i + 4], 'agent', 'op', 'exp')
  if held[1] and held[1] ~= agent then
    table.insert(result, {ARGV[i + 5], held[1], held[2], tonumber(held[3])})
  end
end
if #result > 2 then
  return result
end
local expires = now + ttl
result = {1, now, expires}
for i = 1, n do
  local path = ARGV[i + 5]
  -- Exact in Lua's doubles: a life stays below 2^20, so the token stays below 2^53.
  local token = tonumber(life) * 4294967296 + redis.call('HINCRBY', KEYS[2], path, 1)
  local text = string.format('%.0f', token)
  redis.call('HSET', KEYS[i + 4], 'agent', agent, 'op', operation, 'token', text, 'exp', expires)
  redis.call('PEXPIREAT', KEYS[i + 4], expires)
  redis.call('ZADD', KEYS[1], expires, path)
  table.insert(result, text)
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('PEXPIRE', KEYS[1], retention)
redis.call('PEXPIRE', KEYS[2], retention)
redis.call('PEXPIRE', KEYS[4], retention)
return result
""")

# KEYS: claim index, presence, one claim hash per path, the request key.
# ARGV: agent, presence ttl ms, then the paths in KEYS order.
# Returns {now, entry...}, one entry per path: {1} released, {0} nobody holds it,
# {2, holder, operation, expires_ms} someone else holds it.
RELEASE = _replayable("""
local now = clock()
local agent = ARGV[1]
present(KEYS[2], agent, now, tonumber(ARGV[2]))
local result = {now}
for i = 3, #KEYS - 1 do
  local held = redis.call('HMGET', KEYS[i], 'agent', 'op', 'exp')
  if not held[1] then
    table.insert(result, {0})
  elseif held[1] ~= agent then
    table.insert(result, {2, held[1], held[2], tonumber(held[3])})
  else
    redis.call('DEL', KEYS[i])
    redis.call('ZREM', KEYS[1], ARGV[i])
    table.insert(result, {1})
  end
end
return result
""")

# KEYS: change feed (stream), presence, the session's life, the request key.
# ARGV: agent, paths (JSON), summary, presence ttl ms, feed max entries, retention ms.
# Returns {-1} when the session has no life (see CLAIM), else {life, the new entry's id}.
BROADCAST = _replayable("""
local life = redis.call('GET', KEYS[3])
if not life then
  return {-1}
end
local agent = ARGV[1]
local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[5], '*',
  'agent', agent, 'paths', ARGV[2], 'summary', ARGV[3])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[6]))
redis.call('PEXPIRE', KEYS[3], tonumber(ARGV[6]))
present(KEYS[2], agent, tonumber((string.gsub(id, '-.*', ''))), tonumber(ARGV[4]))
return {life, id}
""")

# KEYS: the session's life. ARGV: a new life number (from the database), retention ms.
# Begins that life unless another instance began one first; returns the session's life either way.
BEGIN_LIFE = """
redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', tonumber(ARGV[2]))
return redis.call('GET', KEYS[1])
"""

# KEYS: presence. ARGV: agent, presence ttl ms. Marking presence is idempotent: no request key needed.
TOUCH = (
    _PRESENT
    + """
present(KEYS[1], ARGV[1], clock(), tonumber(ARGV[2]))
return 1
"""
)
