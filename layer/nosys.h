/*
 * Every entry of an object the provider does not offer, in one place. libfabric's inline
 * wrappers call through the ops tables unchecked, so each slot answers:
 * - -FI_ENOSYS for what the provider never implements (collectives, scalable
 *   endpoints, shared contexts, wait sets, connection management of an RDM
 *   endpoint...);
 * - -FI_EOPNOTSUPP for a data call the endpoint's capabilities leave out (a send on an
 *   endpoint opened without FI_SEND, a tagged call without FI_TAGGED): the endpoint then
 *   puts these in the slot when it opens (ep/ep.c), instead of checking on every call.
 */
#ifndef LAYER_NOSYS_H
#define LAYER_NOSYS_H

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_collective.h>

/* fid */
int layer_no_bind(struct fid *fid, struct fid *bfid, uint64_t flags);
int layer_no_control(struct fid *fid, int command, void *arg);
int layer_no_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops,
		      void *context);

/* fabric */
int layer_no_passive_ep(struct fid_fabric *fabric, struct fi_info *info, struct fid_pep **pep,
			void *context);
int layer_no_wait_open(struct fid_fabric *fabric, struct fi_wait_attr *attr,
		       struct fid_wait **waitset);

/* domain */
int layer_no_scalable_ep(struct fid_domain *domain, struct fi_info *info, struct fid_ep **sep,
			 void *context);
int layer_no_stx_ctx(struct fid_domain *domain, struct fi_tx_attr *attr, struct fid_stx **stx,
		     void *context);
int layer_no_srx_ctx(struct fid_domain *domain, struct fi_rx_attr *attr, struct fid_ep **rx_ep,
		     void *context);
int layer_no_query_collective(struct fid_domain *domain, enum fi_collective_op coll,
			      struct fi_collective_attr *attr, uint64_t flags);

/* endpoint: contexts and connection management of a connectionless endpoint */
int layer_no_tx_ctx(struct fid_ep *sep, int index, struct fi_tx_attr *attr, struct fid_ep **ep,
		    void *context);
int layer_no_rx_ctx(struct fid_ep *sep, int index, struct fi_rx_attr *attr, struct fid_ep **ep,
		    void *context);
int layer_no_getpeer(struct fid_ep *ep, void *addr, size_t *addrlen);
int layer_no_connect(struct fid_ep *ep, const void *addr, const void *param, size_t paramlen);
int layer_no_listen(struct fid_pep *pep);
int layer_no_accept(struct fid_ep *ep, const void *param, size_t paramlen);
int layer_no_reject(struct fid_pep *pep, fid_t handle, const void *param, size_t paramlen);
int layer_no_shutdown(struct fid_ep *ep, uint64_t flags);
int layer_no_join(struct fid_ep *ep, const void *addr, uint64_t flags, struct fid_mc **mc,
		  void *context);

/* endpoint data: collectives on an endpoint without FI_COLLECTIVE (-FI_EOPNOTSUPP) */
extern struct fi_ops_collective layer_no_collective_ops;

/* endpoint data: not offered at all */
extern struct fi_ops_rma layer_no_rma_ops;
extern struct fi_ops_atomic layer_no_atomic_ops;
/* Every slot -FI_EOPNOTSUPP: the endpoint copies what its capabilities leave out. */
extern const struct fi_ops_msg layer_no_msg_ops;
extern const struct fi_ops_tagged layer_no_tagged_ops;

#endif /* LAYER_NOSYS_H */
