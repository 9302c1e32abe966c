--- SHA-256 of a byte string, in Lua (LuaJIT's `bit`). A project's id is the SHA-256 of a prefix
--- that ends in a NUL byte followed by the root; vim.fn.sha256() takes no string with a NUL in it
--- (Neovim hands such a string over as a Blob, which it refuses), and spawning a process to hash
--- would cost what the plugin exists to avoid. FIPS 180-4; checked against Python's hashlib in
--- the tests. Paths are short, so speed is of no concern (a few microseconds each).
local bit = require('bit')
local band, bor, bxor, bnot = bit.band, bit.bor, bit.bxor, bit.bnot
local rshift, lshift, ror, tobit = bit.rshift, bit.lshift, bit.ror, bit.tobit

local K = {
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
}

--- The message padded to a multiple of 64 bytes: 0x80, zeros, then its bit length (big-endian).
local function pad(msg)
  local len = #msg
  local zeros = (55 - len) % 64
  local bits = len * 8
  local tail = {}
  for i = 7, 0, -1 do
    tail[#tail + 1] = string.char(math.floor(bits / 2 ^ (8 * i)) % 256)
  end
  return msg .. '\128' .. string.rep('\0', zeros) .. table.concat(tail)
end

--- The lowercase hex SHA-256 of `msg`.
return function(msg)
  msg = pad(msg)
  local h = { 0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19 }
  for i = 1, #h do
    h[i] = tobit(h[i])
  end
  local w = {}
  for chunk = 1, #msg, 64 do
    for t = 0, 15 do
      local a, b, c, d = msg:byte(chunk + 4 * t, chunk + 4 * t + 3)
      w[t] = bor(lshift(a, 24), lshift(b, 16), lshift(c, 8), d)
    end
    for t = 16, 63 do
      local x, y = w[t - 15], w[t - 2]
      local s0 = bxor(ror(x, 7), ror(x, 18), rshift(x, 3))
      local s1 = bxor(ror(y, 17), ror(y, 19), rshift(y, 10))
      w[t] = tobit(w[t - 16] + s0 + w[t - 7] + s1)
    end
    local a, b, c, d, e, f, g, hh = h[1], h[2], h[3], h[4], h[5], h[6], h[7], h[8]
    for t = 0, 63 do
      local S1 = bxor(ror(e, 6), ror(e, 11), ror(e, 25))
      local ch = bxor(band(e, f), band(bnot(e), g))
      local t1 = tobit(hh + S1 + ch + K[t + 1] + w[t])
      local S0 = bxor(ror(a, 2), ror(a, 13), ror(a, 22))
      local maj = bxor(band(a, b), band(a, c), band(b, c))
      local t2 = tobit(S0 + maj)
      hh, g, f, e, d, c, b, a = g, f, e, tobit(d + t1), c, b, a, tobit(t1 + t2)
    end
    h[1], h[2], h[3], h[4] = tobit(h[1] + a), tobit(h[2] + b), tobit(h[3] + c), tobit(h[4] + d)
    h[5], h[6], h[7], h[8] = tobit(h[5] + e), tobit(h[6] + f), tobit(h[7] + g), tobit(h[8] + hh)
  end
  local out = {}
  for i = 1, 8 do
    out[i] = bit.tohex(h[i], 8)
  end
  return table.concat(out)
end
