/*
 * Endpoint addresses as the provider keeps them: the core's (struct sockaddr_in,
 * sockaddr_in6, or an FI_ADDR_STR name), normalised so that equal addresses are equal
 * bytewise: fields that do not name the endpoint (sin_zero, sin6_flowinfo) zeroed, a name
 * zero-padded to LAYER_ADDR_STR_LEN. The AV compares and hashes them so; the core adapters
 * normalise what their cores report and what peers send.
 */
#ifndef LAYER_ADDR_H
#define LAYER_ADDR_H

#include <string.h>
#include <netinet/in.h>

#include "layer/layer.h"

/* Bytes of a normalised address of the format; 0 for a format the provider does not take. */
static inline size_t layer_addr_len(uint32_t addr_format)
{
	switch (addr_format) {
	case FI_SOCKADDR_IN:
		return sizeof(struct sockaddr_in);
	case FI_SOCKADDR_IN6:
		return sizeof(struct sockaddr_in6);
	case FI_ADDR_STR:
		return LAYER_ADDR_STR_LEN;
	default:
		return 0;
	}
}

/*
 * A sockaddr_in (16 readable bytes at addr) into out. Family, port and address are the first
 * 8 bytes: they and the zeros go to out as two 8-byte stores. A copy patched on the stack and
 * reloaded whole was a 16-byte load of two smaller stores, which the processor cannot
 * forward: it waited for them to retire, behind the previous lookup's cache miss, so that
 * back-to-back reverse lookups (FI_SOURCE) ran one cache miss at a time.
 */
static inline int layer_addr_normalize_in(const void *addr, void *out)
{
	sa_family_t family;
	uint64_t head;

	_Static_assert(offsetof(struct sockaddr_in, sin_zero) == sizeof(head),
		       "sockaddr_in: 8 bytes, then sin_zero");
	memcpy(&head, addr, sizeof(head));
	memcpy(&family, addr, sizeof(family));
	if (family != AF_INET)
		return -FI_EINVAL;
	memcpy(out, &head, sizeof(head));
	memset((uint8_t *) out + sizeof(head), 0, sizeof(struct sockaddr_in) - sizeof(head));
	return 0;
}

/*
 * Normalises an address of the format into out (layer_addr_len bytes); addrlen is the
 * number of bytes readable at addr. 0, or -FI_EINVAL for a wrong family or size, or a name
 * without its NUL within the readable addrlen bytes and LAYER_ADDR_STR_LEN.
 */
int layer_addr_normalize(uint32_t addr_format, const void *addr, size_t addrlen, void *out);

#endif /* LAYER_ADDR_H */
