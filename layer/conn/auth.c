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
 * sends carry that same key: the peer sent with it, so the peer accepts it. Refusals are
 * counted and logged by the core adapters, which tell the peer.
 */
#include "config.h"

#include <inttypes.h>
#include <string.h>

#include "layer/conn/auth.h"
#include "layer/av/av.h"

int layer_auth_init(struct layer_auth *auth, struct layer_domain *domain,
		    const struct fi_info *info)
{
	const struct fi_ep_attr *attr = info->ep_attr;

	auth->has_av_keys = domain->auth_key_size == FI_AV_AUTH_KEY;
	auth->key = domain->auth_key;
	auth->keys = NULL;
	auth->key_cnt = 0;
	/* fi_endpoint(3): the endpoint's own key, from API 1.5 on; the domain's without one */
	if (FI_VERSION_LT(domain->fabric->api_version, FI_VERSION(1, 5)) || !attr->auth_key_size)
		return 0;
	/* fi_av(3) 1.20: with FI_AV_AUTH_KEY the keys come from the AV only */
	if (auth->has_av_keys || !layer_auth_key_attr_ok(attr->auth_key, attr->auth_key_size,
							 false)) {
		FI_WARN(&layer_prov, FI_LOG_EP_CTRL, "endpoint auth_key: 1 to %d bytes, and "
			"none in a domain with FI_AV_AUTH_KEY\n", LAYER_AUTH_KEY_MAX);
		return -FI_EINVAL;
	}
	auth->key.len = (uint8_t) attr->auth_key_size;
	memcpy(auth->key.bytes, attr->auth_key, auth->key.len);
	return 0;
}

int layer_auth_enable(struct layer_auth *auth, struct layer_av *av)
{
	/* The keys an endpoint is enabled with stay in the AV while it lives (fi_av(3)). */
	if (!auth->has_av_keys)
		return 0;
	return layer_av_keys_ref_all(av, &auth->keys, &auth->key_cnt);
}

void layer_auth_fini(struct layer_auth *auth, struct layer_av *av)
{
	if (auth->key_cnt)
		layer_av_keys_unref_all(av, auth->keys, auth->key_cnt);
	auth->keys = NULL;
	auth->key_cnt = 0;
}

bool layer_auth_holds(const struct layer_auth *auth, fi_addr_t key)
{
	size_t i;

	for (i = 0; i < auth->key_cnt; i++) {
		if (auth->keys[i] == key)
			return true;
	}
	return false;
}

int layer_auth_tx_key(struct layer_auth *auth, struct layer_av *av, size_t index,
		      struct layer_key *key, fi_addr_t *handle)
{
	*handle = FI_ADDR_NOTAVAIL;
	if (likely(!auth->has_av_keys)) {
		*key = auth->key;
		return 0;
	}
	layer_av_index_key(av, index, handle, key);
	if (*handle != FI_ADDR_NOTAVAIL && !layer_auth_holds(auth, *handle)) {
		LAYER_WARN_ONCE(FI_LOG_EP_DATA, "send: the address was inserted with key %#"
			PRIx64 ", which the endpoint was not enabled with\n", (uint64_t) *handle);
		return -FI_EACCES;
	}
	return 0;
}

bool layer_auth_accepts(struct layer_auth *auth, struct layer_av *av,
			const struct layer_key *key, fi_addr_t *handle)
{
	*handle = FI_ADDR_NOTAVAIL;
	if (likely(!auth->has_av_keys))
		return layer_key_equal(key, &auth->key);
	*handle = layer_av_keys_find(av, auth->keys, auth->key_cnt, key);
	return *handle != FI_ADDR_NOTAVAIL;
}
