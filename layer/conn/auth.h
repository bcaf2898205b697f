/*
 * Authorization keys of an endpoint's connections: which key its messages carry and which
 * keys it accepts from peers (auth.c says how fi_endpoint(3) and fi_av(3) 1.20 decide).
 * Nothing here runs per message: a connection's key is chosen or checked once, when it
 * opens, and the connection remembers the AV key handle its messages are attributed to.
 */
#ifndef LAYER_CONN_AUTH_H
#define LAYER_CONN_AUTH_H

#include "layer/layer.h"
#include "layer/domain.h"

struct layer_av;

struct layer_auth {
	bool has_av_keys;              /* domain with FI_AV_AUTH_KEY: keys come from the AV */
	struct layer_key key;          /* otherwise: the endpoint's key (its own, else the
					* domain's), or none */
	fi_addr_t *keys;               /* AV keys referenced while enabled (FI_AV_AUTH_KEY) */
	size_t key_cnt;
};

/* At open, the endpoint's key from info: 0 or -FI_EINVAL. */
int layer_auth_init(struct layer_auth *auth, struct layer_domain *domain,
		    const struct fi_info *info);
/* At enable: the AV's keys of that moment, held while enabled (fi_av(3)). 0 or -FI_ENOMEM. */
int layer_auth_enable(struct layer_auth *auth, struct layer_av *av);
void layer_auth_fini(struct layer_auth *auth, struct layer_av *av);
/*
 * The key sends to AV index carry, and its AV key handle (FI_AV_AUTH_KEY; FI_ADDR_NOTAVAIL
 * otherwise): 0, or -FI_EACCES (the address was inserted with a key the endpoint was not
 * enabled with).
 */
int layer_auth_tx_key(struct layer_auth *auth, struct layer_av *av, size_t index,
		      struct layer_key *key, fi_addr_t *handle);
/* Whether a peer's key is one the endpoint accepts, and the AV key handle its messages are
 * attributed to (FI_AV_AUTH_KEY; FI_ADDR_NOTAVAIL otherwise). */
bool layer_auth_accepts(struct layer_auth *auth, struct layer_av *av,
			const struct layer_key *key, fi_addr_t *handle);
/* Whether key is a key handle the endpoint was enabled with. */
bool layer_auth_holds(const struct layer_auth *auth, fi_addr_t key);

#endif /* LAYER_CONN_AUTH_H */
