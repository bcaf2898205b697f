/*
 * Domain: the core's domain, wrapped. It opens the application's objects (AV, CQ, counter,
 * endpoint), registers memory (mr.c) and holds what its endpoints share.
 */
#ifndef LAYER_DOMAIN_H
#define LAYER_DOMAIN_H

#include <stdatomic.h>

#include "layer/layer.h"
#include "layer/fabric.h"
#include "layer/mr.h"
#include "layer/progress.h"
#include "util/progress.h"

struct layer_domain {
	struct fid_domain domain_fid;
	struct layer_fabric *fabric;
	struct fid_domain *core_domain;
	struct fi_info *core_info;     /* the core info (FI_EP_MSG or FI_EP_RDM) this domain was
					* opened with: its ep type chooses the endpoint's core
					* adapter */
	enum fi_threading threading;
	bool is_thread_safe;           /* FI_THREAD_SAFE, or a progress thread: objects take
					* their locks */
	uint32_t addr_format;          /* the core's: FI_SOCKADDR_IN, _IN6 or FI_ADDR_STR */
	size_t addrlen;                /* size of one endpoint address */
	uint64_t mr_mode;              /* as granted to the application */
	size_t auth_key_size;          /* FI_AV_AUTH_KEY: keys come from the AV; else 0 */
	struct layer_key auth_key;     /* the domain's key (domain_attr->auth_key), or none */
	struct layer_mr_domain mr;     /* the core's registrations (mr.h) */
	/* The core hands each message's payload to the provider's callback, which places it
	 * (core/core_msg.c); buffers then post the header only. MSG cores only. */
	bool has_direct_recv;
	struct util_progress_set eps;  /* the enabled endpoints (struct layer_progress_member):
					* the progress thread runs them, so do counters bound to
					* a registration (fi_mr_bind); a region's close revokes
					* its grants through it */
	struct layer_progress *progress_thread; /* FI_PROGRESS_AUTO; NULL: manual */
	atomic_int ref;                /* objects open on this domain */
};

int layer_domain_open(struct fid_fabric *fabric, struct fi_info *info,
		      struct fid_domain **domain, void *context);
/* The region of key closes or gets a counter: every endpoint revokes its grants of it
 * (rma/grant.h). No lock of the domain's held. */
void layer_domain_revoke(struct layer_domain *domain, uint64_t key);

#endif /* LAYER_DOMAIN_H */
