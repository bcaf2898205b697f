/* What the provider does not offer, every entry in one place (nosys.h). */
#include "config.h"

#include "layer/nosys.h"

int layer_no_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	return -FI_ENOSYS;
}

int layer_no_control(struct fid *fid, int command, void *arg)
{
	return -FI_ENOSYS;
}

int layer_no_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops,
		      void *context)
{
	return -FI_ENOSYS;
}

int layer_no_passive_ep(struct fid_fabric *fabric, struct fi_info *info, struct fid_pep **pep,
			void *context)
{
	return -FI_ENOSYS;
}

int layer_no_wait_open(struct fid_fabric *fabric, struct fi_wait_attr *attr,
		       struct fid_wait **waitset)
{
	return -FI_ENOSYS;
}

int layer_no_scalable_ep(struct fid_domain *domain, struct fi_info *info, struct fid_ep **sep,
			 void *context)
{
	return -FI_ENOSYS;
}

int layer_no_stx_ctx(struct fid_domain *domain, struct fi_tx_attr *attr, struct fid_stx **stx,
		     void *context)
{
	return -FI_ENOSYS;
}

int layer_no_srx_ctx(struct fid_domain *domain, struct fi_rx_attr *attr, struct fid_ep **rx_ep,
		     void *context)
{
	return -FI_ENOSYS;
}

int layer_no_query_collective(struct fid_domain *domain, enum fi_collective_op coll,
			      struct fi_collective_attr *attr, uint64_t flags)
{
	return -FI_ENOSYS;
}

int layer_no_tx_ctx(struct fid_ep *sep, int index, struct fi_tx_attr *attr, struct fid_ep **ep,
		    void *context)
{
	return -FI_ENOSYS;
}

int layer_no_rx_ctx(struct fid_ep *sep, int index, struct fi_rx_attr *attr, struct fid_ep **ep,
		    void *context)
{
	return -FI_ENOSYS;
}

int layer_no_getpeer(struct fid_ep *ep, void *addr, size_t *addrlen)
{
	return -FI_ENOSYS;
}

int layer_no_connect(struct fid_ep *ep, const void *addr, const void *param, size_t paramlen)
{
	return -FI_ENOSYS;
}

int layer_no_listen(struct fid_pep *pep)
{
	return -FI_ENOSYS;
}

int layer_no_accept(struct fid_ep *ep, const void *param, size_t paramlen)
{
	return -FI_ENOSYS;
}

int layer_no_reject(struct fid_pep *pep, fid_t handle, const void *param, size_t paramlen)
{
	return -FI_ENOSYS;
}

int layer_no_shutdown(struct fid_ep *ep, uint64_t flags)
{
	return -FI_ENOSYS;
}

int layer_no_join(struct fid_ep *ep, const void *addr, uint64_t flags, struct fid_mc **mc,
		  void *context)
{
	return -FI_ENOSYS;
}

static ssize_t nosys_rma_read(struct fid_ep *ep, void *buf, size_t len, void *desc,
			      fi_addr_t src_addr, uint64_t addr, uint64_t key, void *context)
{
	return -FI_ENOSYS;
}

static ssize_t nosys_rma_readv(struct fid_ep *ep, const struct iovec *iov, void **desc,
			       size_t count, fi_addr_t src_addr, uint64_t addr, uint64_t key,
			       void *context)
{
	return -FI_ENOSYS;
}

static ssize_t nosys_rma_msg(struct fid_ep *ep, const struct fi_msg_rma *msg, uint64_t flags)
{
	return -FI_ENOSYS;
}

static ssize_t nosys_rma_write(struct fid_ep *ep, const void *buf, size_t len, void *desc,
			       fi_addr_t dest_addr, uint64_t addr, uint64_t key, void *context)
{
	return -FI_ENOSYS;
}

static ssize_t nosys_rma_inject(struct fid_ep *ep, const void *buf, size_t len,
				fi_addr_t dest_addr, uint64_t addr, uint64_t key)
{
	return -FI_ENOSYS;
}

static ssize_t nosys_rma_writedata(struct fid_ep *ep, const void *buf, size_t len,
				   void *desc, uint64_t data, fi_addr_t dest_addr,
				   uint64_t addr, uint64_t key, void *context)
{
	return -FI_ENOSYS;
}

static ssize_t nosys_rma_injectdata(struct fid_ep *ep, const void *buf, size_t len,
				    uint64_t data, fi_addr_t dest_addr, uint64_t addr,
				    uint64_t key)
{
	return -FI_ENOSYS;
}

struct fi_ops_rma layer_no_rma_ops = {
	.size = sizeof(struct fi_ops_rma),
	.read = nosys_rma_read,
	.readv = nosys_rma_readv,
	.readmsg = nosys_rma_msg,
	.write = nosys_rma_write,
	.writev = nosys_rma_readv,
	.writemsg = nosys_rma_msg,
	.inject = nosys_rma_inject,
	.writedata = nosys_rma_writedata,
	.injectdata = nosys_rma_injectdata,
};

static ssize_t nosys_atomic_write(struct fid_ep *ep, const void *buf, size_t count,
				  void *desc, fi_addr_t dest_addr, uint64_t addr, uint64_t key,
				  enum fi_datatype datatype, enum fi_op op, void *context)
{
	return -FI_ENOSYS;
}

static ssize_t nosys_atomic_writev(struct fid_ep *ep, const struct fi_ioc *iov, void **desc,
				   size_t count, fi_addr_t dest_addr, uint64_t addr,
				   uint64_t key, enum fi_datatype datatype, enum fi_op op,
				   void *context)
{
	return -FI_ENOSYS;
}

static ssize_t nosys_atomic_writemsg(struct fid_ep *ep, const struct fi_msg_atomic *msg,
				     uint64_t flags)
{
	return -FI_ENOSYS;
}

static ssize_t nosys_atomic_inject(struct fid_ep *ep, const void *buf, size_t count,
				   fi_addr_t dest_addr, uint64_t addr, uint64_t key,
				   enum fi_datatype datatype, enum fi_op op)
{
	return -FI_ENOSYS;
}

static ssize_t nosys_atomic_readwrite(struct fid_ep *ep, const void *buf, size_t count,
				      void *desc, void *result, void *result_desc,
				      fi_addr_t dest_addr, uint64_t addr, uint64_t key,
				      enum fi_datatype datatype, enum fi_op op, void *context)
{
	return -FI_ENOSYS;
}

static ssize_t nosys_atomic_readwritev(struct fid_ep *ep, const struct fi_ioc *iov,
				       void **desc, size_t count, struct fi_ioc *resultv,
				       void **result_desc, size_t result_count,
				       fi_addr_t dest_addr, uint64_t addr, uint64_t key,
				       enum fi_datatype datatype, enum fi_op op, void *context)
{
	return -FI_ENOSYS;
}

static ssize_t nosys_atomic_readwritemsg(struct fid_ep *ep, const struct fi_msg_atomic *msg,
					 struct fi_ioc *resultv, void **result_desc,
					 size_t result_count, uint64_t flags)
{
	return -FI_ENOSYS;
}

static ssize_t nosys_atomic_compwrite(struct fid_ep *ep, const void *buf, size_t count,
				      void *desc, const void *compare, void *compare_desc,
				      void *result, void *result_desc, fi_addr_t dest_addr,
				      uint64_t addr, uint64_t key, enum fi_datatype datatype,
				      enum fi_op op, void *context)
{
	return -FI_ENOSYS;
}

static ssize_t nosys_atomic_compwritev(struct fid_ep *ep, const struct fi_ioc *iov,
				       void **desc, size_t count, const struct fi_ioc *comparev,
				       void **compare_desc, size_t compare_count,
				       struct fi_ioc *resultv, void **result_desc,
				       size_t result_count, fi_addr_t dest_addr, uint64_t addr,
				       uint64_t key, enum fi_datatype datatype, enum fi_op op,
				       void *context)
{
	return -FI_ENOSYS;
}

static ssize_t nosys_atomic_compwritemsg(struct fid_ep *ep, const struct fi_msg_atomic *msg,
					 const struct fi_ioc *comparev, void **compare_desc,
					 size_t compare_count, struct fi_ioc *resultv,
					 void **result_desc, size_t result_count, uint64_t flags)
{
	return -FI_ENOSYS;
}

static int nosys_atomic_valid(struct fid_ep *ep, enum fi_datatype datatype, enum fi_op op,
			      size_t *count)
{
	return -FI_ENOSYS;
}

struct fi_ops_atomic layer_no_atomic_ops = {
	.size = sizeof(struct fi_ops_atomic),
	.write = nosys_atomic_write,
	.writev = nosys_atomic_writev,
	.writemsg = nosys_atomic_writemsg,
	.inject = nosys_atomic_inject,
	.readwrite = nosys_atomic_readwrite,
	.readwritev = nosys_atomic_readwritev,
	.readwritemsg = nosys_atomic_readwritemsg,
	.compwrite = nosys_atomic_compwrite,
	.compwritev = nosys_atomic_compwritev,
	.compwritemsg = nosys_atomic_compwritemsg,
	.writevalid = nosys_atomic_valid,
	.readwritevalid = nosys_atomic_valid,
	.compwritevalid = nosys_atomic_valid,
};

/* Data calls the endpoint's capabilities leave out: -FI_EOPNOTSUPP. */

static ssize_t layer_no_recv(struct fid_ep *ep, void *buf, size_t len, void *desc,
			     fi_addr_t src_addr, void *context)
{
	return -FI_EOPNOTSUPP;
}

static ssize_t layer_no_recvv(struct fid_ep *ep, const struct iovec *iov, void **desc,
			      size_t count, fi_addr_t src_addr, void *context)
{
	return -FI_EOPNOTSUPP;
}

static ssize_t layer_no_recvmsg(struct fid_ep *ep, const struct fi_msg *msg, uint64_t flags)
{
	return -FI_EOPNOTSUPP;
}

static ssize_t layer_no_send(struct fid_ep *ep, const void *buf, size_t len, void *desc,
			     fi_addr_t dest_addr, void *context)
{
	return -FI_EOPNOTSUPP;
}

static ssize_t layer_no_sendv(struct fid_ep *ep, const struct iovec *iov, void **desc,
			      size_t count, fi_addr_t dest_addr, void *context)
{
	return -FI_EOPNOTSUPP;
}

static ssize_t layer_no_sendmsg(struct fid_ep *ep, const struct fi_msg *msg, uint64_t flags)
{
	return -FI_EOPNOTSUPP;
}

static ssize_t layer_no_inject(struct fid_ep *ep, const void *buf, size_t len,
			       fi_addr_t dest_addr)
{
	return -FI_EOPNOTSUPP;
}

static ssize_t layer_no_senddata(struct fid_ep *ep, const void *buf, size_t len, void *desc,
				 uint64_t data, fi_addr_t dest_addr, void *context)
{
	return -FI_EOPNOTSUPP;
}

static ssize_t layer_no_injectdata(struct fid_ep *ep, const void *buf, size_t len,
				   uint64_t data, fi_addr_t dest_addr)
{
	return -FI_EOPNOTSUPP;
}

const struct fi_ops_msg layer_no_msg_ops = {
	.size = sizeof(struct fi_ops_msg),
	.recv = layer_no_recv,
	.recvv = layer_no_recvv,
	.recvmsg = layer_no_recvmsg,
	.send = layer_no_send,
	.sendv = layer_no_sendv,
	.sendmsg = layer_no_sendmsg,
	.inject = layer_no_inject,
	.senddata = layer_no_senddata,
	.injectdata = layer_no_injectdata,
};

static ssize_t layer_no_trecv(struct fid_ep *ep, void *buf, size_t len, void *desc,
			      fi_addr_t src_addr, uint64_t tag, uint64_t ignore, void *context)
{
	return -FI_EOPNOTSUPP;
}

static ssize_t layer_no_trecvv(struct fid_ep *ep, const struct iovec *iov, void **desc,
			       size_t count, fi_addr_t src_addr, uint64_t tag, uint64_t ignore,
			       void *context)
{
	return -FI_EOPNOTSUPP;
}

static ssize_t layer_no_trecvmsg(struct fid_ep *ep, const struct fi_msg_tagged *msg,
				 uint64_t flags)
{
	return -FI_EOPNOTSUPP;
}

static ssize_t layer_no_tsend(struct fid_ep *ep, const void *buf, size_t len, void *desc,
			      fi_addr_t dest_addr, uint64_t tag, void *context)
{
	return -FI_EOPNOTSUPP;
}

static ssize_t layer_no_tsendv(struct fid_ep *ep, const struct iovec *iov, void **desc,
			       size_t count, fi_addr_t dest_addr, uint64_t tag, void *context)
{
	return -FI_EOPNOTSUPP;
}

static ssize_t layer_no_tsendmsg(struct fid_ep *ep, const struct fi_msg_tagged *msg,
				 uint64_t flags)
{
	return -FI_EOPNOTSUPP;
}

static ssize_t layer_no_tinject(struct fid_ep *ep, const void *buf, size_t len,
				fi_addr_t dest_addr, uint64_t tag)
{
	return -FI_EOPNOTSUPP;
}

static ssize_t layer_no_tsenddata(struct fid_ep *ep, const void *buf, size_t len, void *desc,
				  uint64_t data, fi_addr_t dest_addr, uint64_t tag,
				  void *context)
{
	return -FI_EOPNOTSUPP;
}

static ssize_t layer_no_tinjectdata(struct fid_ep *ep, const void *buf, size_t len,
				    uint64_t data, fi_addr_t dest_addr, uint64_t tag)
{
	return -FI_EOPNOTSUPP;
}

const struct fi_ops_tagged layer_no_tagged_ops = {
	.size = sizeof(struct fi_ops_tagged),
	.recv = layer_no_trecv,
	.recvv = layer_no_trecvv,
	.recvmsg = layer_no_trecvmsg,
	.send = layer_no_tsend,
	.sendv = layer_no_tsendv,
	.sendmsg = layer_no_tsendmsg,
	.inject = layer_no_tinject,
	.senddata = layer_no_tsenddata,
	.injectdata = layer_no_tinjectdata,
};

/* Collective calls on an endpoint without FI_COLLECTIVE: -FI_EOPNOTSUPP. */

static ssize_t layer_no_barrier(struct fid_ep *ep, fi_addr_t coll_addr, void *context)
{
	return -FI_EOPNOTSUPP;
}

static ssize_t layer_no_barrier2(struct fid_ep *ep, fi_addr_t coll_addr, uint64_t flags,
				 void *context)
{
	return -FI_EOPNOTSUPP;
}

static ssize_t layer_no_broadcast(struct fid_ep *ep, void *buf, size_t count, void *desc,
				  fi_addr_t coll_addr, fi_addr_t root_addr,
				  enum fi_datatype datatype, uint64_t flags, void *context)
{
	return -FI_EOPNOTSUPP;
}

/* alltoall, allgather: the same arguments */
static ssize_t layer_no_coll_move(struct fid_ep *ep, const void *buf, size_t count, void *desc,
				  void *result, void *result_desc, fi_addr_t coll_addr,
				  enum fi_datatype datatype, uint64_t flags, void *context)
{
	return -FI_EOPNOTSUPP;
}

/* allreduce, reduce_scatter */
static ssize_t layer_no_coll_reduce(struct fid_ep *ep, const void *buf, size_t count,
				    void *desc, void *result, void *result_desc,
				    fi_addr_t coll_addr, enum fi_datatype datatype, enum fi_op op,
				    uint64_t flags, void *context)
{
	return -FI_EOPNOTSUPP;
}

static ssize_t layer_no_reduce(struct fid_ep *ep, const void *buf, size_t count, void *desc,
			       void *result, void *result_desc, fi_addr_t coll_addr,
			       fi_addr_t root_addr, enum fi_datatype datatype, enum fi_op op,
			       uint64_t flags, void *context)
{
	return -FI_EOPNOTSUPP;
}

/* scatter, gather */
static ssize_t layer_no_coll_root(struct fid_ep *ep, const void *buf, size_t count, void *desc,
				  void *result, void *result_desc, fi_addr_t coll_addr,
				  fi_addr_t root_addr, enum fi_datatype datatype, uint64_t flags,
				  void *context)
{
	return -FI_EOPNOTSUPP;
}

static ssize_t layer_no_coll_msg(struct fid_ep *ep, const struct fi_msg_collective *msg,
				 struct fi_ioc *resultv, void **result_desc, size_t result_count,
				 uint64_t flags)
{
	return -FI_EOPNOTSUPP;
}

struct fi_ops_collective layer_no_collective_ops = {
	.size = sizeof(struct fi_ops_collective),
	.barrier = layer_no_barrier,
	.broadcast = layer_no_broadcast,
	.alltoall = layer_no_coll_move,
	.allreduce = layer_no_coll_reduce,
	.allgather = layer_no_coll_move,
	.reduce_scatter = layer_no_coll_reduce,
	.reduce = layer_no_reduce,
	.scatter = layer_no_coll_root,
	.gather = layer_no_coll_root,
	.msg = layer_no_coll_msg,
	.barrier2 = layer_no_barrier2,
};
