/*
 * Operation tables for what the endpoint does not offer (RMA, atomics): libfabric's
 * inline wrappers call through these tables unchecked, so every slot answers -FI_ENOSYS.
 */
#include "config.h"

#include <rdma/fi_rma.h>
#include <rdma/fi_atomic.h>

#include "layer/ep.h"

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
