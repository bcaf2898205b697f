/* Normalised endpoint addresses (addr.h). */
#include "config.h"

#include <string.h>
#include <netinet/in.h>

#include "layer/addr.h"

/*
 * addrlen is the number of bytes readable at addr; only the format's size is used. Fields
 * that do not name the endpoint (sin_zero, sin6_flowinfo) are zeroed so that equal addresses
 * are equal bytewise, for the reverse lookup.
 */
int layer_addr_normalize(uint32_t addr_format, const void *addr, size_t addrlen, void *out)
{
	struct sockaddr_in6 sin6;
	size_t len;

	/* a name may be shorter than its slot: it ends at its NUL */
	if (addr && addr_format == FI_ADDR_STR) {
		len = strnlen(addr, UTIL_MIN(addrlen, (size_t) LAYER_ADDR_STR_LEN));
		if (!len || len >= UTIL_MIN(addrlen, (size_t) LAYER_ADDR_STR_LEN))
			return -FI_EINVAL;
		/* fi_getinfo(3): "format://address...", as shm's "fi_shm://..." */
		if (!memmem(addr, len, "://", 3))
			return -FI_EINVAL;
		memset(out, 0, LAYER_ADDR_STR_LEN);
		memcpy(out, addr, len);
		return 0;
	}
	if (!addr || addrlen < layer_addr_len(addr_format))
		return -FI_EINVAL;

	switch (addr_format) {
	case FI_SOCKADDR_IN:
		return layer_addr_normalize_in(addr, out);
	case FI_SOCKADDR_IN6:
		memcpy(&sin6, addr, sizeof(sin6));
		if (sin6.sin6_family != AF_INET6)
			return -FI_EINVAL;
		sin6.sin6_flowinfo = 0;
		memcpy(out, &sin6, sizeof(sin6));
		return 0;
	default:
		return -FI_EINVAL;
	}
}
