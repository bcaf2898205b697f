/* The contexts ofi_layer gives the core (core.h, ring.h). */
#ifndef LAYER_CORE_CTX_H
#define LAYER_CORE_CTX_H

struct layer_chan;

/* What every context given to the core is: its first field says which. */
enum layer_ctx_type {
	LAYER_CTX_BUF,      /* struct layer_buf: a posted receive buffer (the adapter's) */
	LAYER_CTX_SEND,     /* a send of the layers above */
	LAYER_CTX_READ,     /* an RMA read of the layers above */
	LAYER_CTX_CTRL,     /* a handshake message of the adapter (RDM) */
	LAYER_CTX_RING,     /* a write of staged ring slots (MSG, ring.h) */
};

/* The head of every context given to the core: its kind and the channel it went on. */
struct layer_ctx {
	enum layer_ctx_type type;
	struct layer_chan *chan;
};

#endif /* LAYER_CORE_CTX_H */
