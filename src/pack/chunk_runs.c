/* Run-coded byte planes (plane mode "runs", compact payloads only).
 *
 * A delta of a zip local header or a pickle against its newer version is a
 * plane of a hundred-odd bytes that is zero but for a few bytes in one or
 * two places (the CRC of the bytes behind the header).  zstd spends 5 bytes
 * on its frame and block headers alone and about 20 on such a plane; as
 * runs, it takes the bytes that changed and 2 or 3 more.  A checkpoint
 * holds one such delta per storage.
 *
 * The plane's data is a sequence of (z, m, m bytes): z zero bytes, then m
 * literal bytes, both counts LEB128 (ckptfs/leb128.h); the plane is zero
 * after the last literal.
 */
#include "config.h"
#include "chunk_int.h"
#include "ckptfs/leb128.h"

int ck_runs_encode(const uint8_t *plane, size_t n, uint8_t *out, size_t limit, size_t *len)
{
	size_t pos = 0, i = 0;

	while (i < n) {
		size_t z = i, lit;

		while (i < n && plane[i] == 0)
			i++;
		if (i == n)
			break;          /* trailing zeros are implied */
		z = i - z;
		lit = i;
		/* a literal run ends at two zeros in a row (one zero inside costs
		 * less as a literal than as a new run's two counts) */
		while (i < n && (plane[i] || (i + 1 < n && plane[i + 1])))
			i++;
		lit = i - lit;
		if (pos + 6 + lit >= limit)
			return -1;
		pos += ck_leb128_put(out + pos, (uint32_t)z);
		pos += ck_leb128_put(out + pos, (uint32_t)lit);
		memcpy(out + pos, plane + i - lit, lit);
		pos += lit;
	}
	*len = pos;
	return pos < limit ? 0 : -1;
}

int ck_runs_decode(const uint8_t *p, size_t len, uint8_t *plane, size_t n)
{
	size_t pos = 0, at = 0;

	memset(plane, 0, n);
	while (pos < len) {
		uint32_t z, m;

		if (ck_leb128_get(p, len, &pos, &z) != 1 || ck_leb128_get(p, len, &pos, &m) != 1 || m == 0 ||
		    z > n - at || m > n - at - z || m > len - pos)
			return -1;
		at += z;
		memcpy(plane + at, p + pos, m);
		at += m;
		pos += m;
	}
	return 0;
}
