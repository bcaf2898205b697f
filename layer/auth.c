/*
 * Authorization keys on the data path: which key an endpoint's messages carry, and which
 * keys it accepts from its peers.
 *
 * fi_endpoint(3): "Only peer endpoints that are programmed to use the same authorization key
 * may communicate", and an endpoint uses the domain's key unless given its own. fi_av(3)
 * 1.20: with FI_AV_AUTH_KEY an endpoint is configured, when enabled, with the AV's keys of
 * that moment, and an address inserted with a key is "the endpoint address against the
 * specified authorization key". So:
 * - Sending: an endpoint with its own or the domain's key sends with it to everyone; with
 *   FI_AV_AUTH_KEY a send to an address carries the key that address was inserted with (an
 *   address inserted without one: no key), which must be one the endpoint was enabled with
 *   (-FI_EACCES otherwise); without any key, messages carry none.
 * - Receiving: an endpoint accepts exactly the keys it sends with: its own (or the domain's);
 *   with FI_AV_AUTH_KEY, the keys it was enabled with (a peer without a key is refused);
 *   without any key, peers without a key. A peer's key is checked once per connection (the
 *   connection request, or the HELLO of a key slot over an RDM core); what a refused peer
 *   sends is never delivered, and each refusal is counted (FI_OPT_LAYER_AUTH_DROPPED).
 * Nothing here runs per message: a connection remembers its key. A connection accepted
 * from a peer and adopted for sending to it (conn.c) serves the AV entry of its key, whose
 * sends carry that same key: the peer sent with it, so the peer accepts it.
 */
#include "config.h"

#include <inttypes.h>
#include <string.h>

#include "layer/ep.h"
#include "layer/av.h"

int layer_auth_init(struct layer_ep *ep, const struct fi_info *info)
{
	const struct fi_ep_attr *attr = info->ep_attr;
	struct layer_domain *domain = ep->domain;

	ep->has_av_keys = domain->auth_key_size == FI_AV_AUTH_KEY;
	ep->auth_key = domain->auth_key;
	/* fi_endpoint(3): the endpoint's own key, from API 1.5 on; the domain's without one */
	if (FI_VERSION_LT(domain->fabric->api_version, FI_VERSION(1, 5)) || !attr->auth_key_size)
		return 0;
	/* fi_av(3) 1.20: with FI_AV_AUTH_KEY the keys come from the AV only */
	if (ep->has_av_keys || !layer_auth_key_attr_ok(attr->auth_key, attr->auth_key_size,
						       false)) {
		FI_WARN(&layer_prov, FI_LOG_EP_CTRL, "endpoint auth_key: 1 to %d bytes, and "
			"none in a domain with FI_AV_AUTH_KEY\n", LAYER_AUTH_KEY_MAX);
		return -FI_EINVAL;
	}
	ep->auth_key.len = (uint8_t) attr->auth_key_size;
	memcpy(ep->auth_key.bytes, attr->auth_key, ep->auth_key.len);
	return 0;
}

bool layer_auth_holds(const struct layer_ep *ep, fi_addr_t key)
{
	size_t i;

	for (i = 0; i < ep->key_cnt; i++) {
		if (ep->keys[i] == key)
			return true;
	}
	return false;
}

int layer_auth_tx_key(struct layer_ep *ep, size_t index, struct layer_key *key,
		      fi_addr_t *handle)
{
	*handle = FI_ADDR_NOTAVAIL;
	if (likely(!ep->has_av_keys)) {
		*key = ep->auth_key;
		return 0;
	}
	layer_av_index_key(ep->av, index, handle, key);
	if (*handle != FI_ADDR_NOTAVAIL && !layer_auth_holds(ep, *handle)) {
		FI_WARN(&layer_prov, FI_LOG_EP_DATA, "send: the address was inserted with key %#"
			PRIx64 ", which the endpoint was not enabled with\n", (uint64_t) *handle);
		return -FI_EACCES;
	}
	return 0;
}

bool layer_auth_accepts(struct layer_ep *ep, const struct layer_key *key, fi_addr_t *handle)
{
	*handle = FI_ADDR_NOTAVAIL;
	if (likely(!ep->has_av_keys))
		return layer_key_equal(key, &ep->auth_key);
	*handle = layer_av_keys_find(ep->av, ep->keys, ep->key_cnt, key);
	return *handle != FI_ADDR_NOTAVAIL;
}

void layer_auth_refused(struct layer_ep *ep, const char *what)
{
	/* Warned once per endpoint, then counted: a peer with a wrong key cannot flood the log. */
	FI_LOG(&layer_prov, ep->auth_dropped_cnt ? FI_LOG_INFO : FI_LOG_WARN, FI_LOG_EP_CTRL,
	       "refusing %s: its authorization key is not one the endpoint accepts (%" PRIu64
	       " refused before)\n", what, ep->auth_dropped_cnt);
	ep->auth_dropped_cnt++;
}
