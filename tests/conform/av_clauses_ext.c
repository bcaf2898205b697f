/*
 * The clauses of fi_av(3) beyond the basic AV (see av_clauses.c): user IDs and authorization
 * keys (the 1.20 additions), named AVs shared between processes, and the 1.20 ops layout.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fi_cm.h>
#include <rdma/fi_ext_layer.h>

#include "conform.h"

#define MSG_MS 10000
#define USER_ID 0xabcdULL

/* ---- user IDs ---- */

enum verdict user_id_insert(struct env *e)
{
	fi_addr_t ids[2] = {0x1111, 0x2222};
	struct fid_av *av;
	int ret;

	OPEN_AV(FI_AV_TABLE, 0, 0, &av);
	ret = conform_insert_n(e, av, 0, 2, ids, FI_AV_USER_ID, NULL);
	if (ret < 0)
		return conform_done(e, av, conform_refused(e, "insert(FI_AV_USER_ID)", ret));
	if (ret != 2 || !conform_holds(e, av, ids[0], 0) || !conform_holds(e, av, ids[1], 1))
		return conform_done(e, av,
				    FAIL("ids in, fi_addrs out: %d, %#llx %#llx", ret,
					 (unsigned long long) ids[0], (unsigned long long) ids[1]));
	return conform_done(e, av, V_PASS);
}

enum verdict user_id_attr(struct env *e)
{
	fi_addr_t fi_addr, id = 5;
	struct fid_av *av;
	int ret;

	ret = conform_av_open(e, FI_AV_TABLE, FI_AV_USER_ID, 0, &av);
	/* an open flag of 1.20: a provider that predates it refuses an unknown flag */
	if (ret == -FI_EINVAL || ret == -FI_EBADFLAGS || ret == -FI_ENOSYS || ret == -FI_EOPNOTSUPP)
		return conform_unsupported(e, "FI_AV_USER_ID open flag refused: %d (%s)", ret,
					   fi_strerror(-ret));
	if (ret)
		return FAIL("fi_av_open(FI_AV_USER_ID): %d", ret);
	ret = conform_insert_n(e, av, 0, 1, &id, FI_AV_USER_ID, NULL);
	if (ret >= 0)
		return conform_done(e, av, FAIL("per-insertion FI_AV_USER_ID accepted (%d)", ret));
	conform_insert_n(e, av, 0, 1, &fi_addr, 0, NULL);
	ret = fi_av_set_user_id(av, fi_addr, 0x77, 0);
	if (ret)
		return conform_done(e, av, conform_refused(e, "fi_av_set_user_id", ret));
	ret = fi_av_set_user_id(av, 12345, 0x77, 0);
	if (ret != -FI_EINVAL)
		return conform_done(e, av, FAIL("set_user_id of an unknown fi_addr: %d", ret));
	return conform_done(e, av, V_PASS);
}

/* Two endpoints; b knows a by a user ID; what b's completion reports as the source. */
enum verdict user_id_report(struct env *e)
{
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_CONTEXT, .size = 64};
	struct fid_av *av[2] = {NULL, NULL};
	struct fid_cq *cq[2] = {NULL, NULL};
	struct fid_ep *ep[2] = {NULL, NULL};
	char name[2][256], buf[64] = "user id";
	struct fi_cq_entry comp;
	fi_addr_t to_b, id = USER_ID, src = FI_ADDR_NOTAVAIL;
	enum verdict v = V_PASS;
	size_t len;
	uint64_t deadline;
	ssize_t ret;
	int i, ctx;

	if (e->info->ep_attr->type != FI_EP_RDM || !(e->info->caps & FI_SOURCE))
		return conform_unsupported(e, "needs FI_EP_RDM with FI_SOURCE");
	for (i = 0; i < 2; i++) {
		if (conform_av_open(e, FI_AV_TABLE, 0, 0, &av[i]) ||
		    fi_cq_open(e->domain, &cq_attr, &cq[i], NULL) ||
		    fi_endpoint(e->domain, e->info, &ep[i], NULL) ||
		    fi_ep_bind(ep[i], &av[i]->fid, 0) ||
		    fi_ep_bind(ep[i], &cq[i]->fid, FI_TRANSMIT | FI_RECV) || fi_enable(ep[i])) {
			v = conform_unsupported(e, "could not set up two endpoints");
			goto out;
		}
		len = sizeof(name[i]);
		if (fi_getname(&ep[i]->fid, name[i], &len)) {
			v = conform_unsupported(e, "fi_getname failed");
			goto out;
		}
	}
	if (fi_av_insert(av[0], name[1], 1, &to_b, 0, NULL) != 1) {
		v = FAIL("a cannot insert b");
		goto out;
	}
	ret = fi_av_insert(av[1], name[0], 1, &id, FI_AV_USER_ID, NULL);
	if (ret != 1) {
		v = ret < 0 ? conform_refused(e, "insert(FI_AV_USER_ID)", (int) ret)
			    : FAIL("b cannot insert a");
		goto out;
	}
	deadline = (uint64_t) time(NULL) + MSG_MS / 1000;
	while ((ret = fi_recv(ep[1], buf, sizeof(buf), NULL, FI_ADDR_UNSPEC, &ctx)) == -FI_EAGAIN)
		fi_cq_read(cq[1], &comp, 1);
	while (!ret && (ret = fi_send(ep[0], buf, sizeof(buf), NULL, to_b, &ctx)) == -FI_EAGAIN)
		fi_cq_read(cq[0], &comp, 1);
	if (ret) {
		v = FAIL("send or receive: %zd", ret);
		goto out;
	}
	for (;;) {
		fi_cq_read(cq[0], &comp, 1);
		ret = fi_cq_readfrom(cq[1], &comp, 1, &src);
		if (ret == 1)
			break;
		if ((uint64_t) time(NULL) > deadline) {
			v = FAIL("no receive completion");
			goto out;
		}
	}
	if (src != USER_ID)
		v = FAIL("completion source %#llx, not the user ID %#llx", (unsigned long long) src,
			 USER_ID);
out:
	for (i = 0; i < 2; i++) {
		if (ep[i])
			fi_close(&ep[i]->fid);
		if (cq[i])
			fi_close(&cq[i]->fid);
		if (av[i])
			fi_close(&av[i]->fid);
	}
	return v;
}

/* ---- authorization keys (a domain opened with FI_AV_AUTH_KEY) ---- */

enum verdict auth_domain(struct env *e)
{
	/* an info that ignores the hint is a provider without the feature, not a wrong one */
	if (e->info->domain_attr->auth_key_size != FI_AV_AUTH_KEY)
		return conform_unsupported(e, "asked FI_AV_AUTH_KEY, got auth_key_size %zu",
					   e->info->domain_attr->auth_key_size);
	return V_PASS;
}

enum verdict auth_insert_lookup(struct env *e)
{
	char buf[64];
	fi_addr_t key;
	struct fid_av *av;
	size_t size = 3;
	int ret;

	OPEN_AV(FI_AV_TABLE, 0, 0, &av);
	ret = fi_av_insert_auth_key(av, "secret", 6, &key, 0);
	if (ret)
		return conform_done(e, av, conform_refused(e, "fi_av_insert_auth_key", ret));
	memset(buf, '.', sizeof(buf));
	ret = fi_av_lookup_auth_key(av, key, buf, &size);
	if (ret || size != 6 || memcmp(buf, "sec", 3) || buf[3] != '.')
		return conform_done(e, av, FAIL("lookup into 3 bytes: %d, size %zu", ret, size));
	return conform_done(e, av, V_PASS);
}

enum verdict auth_size(struct env *e)
{
	fi_addr_t key;
	struct fid_av *av;
	int ret;

	OPEN_AV(FI_AV_TABLE, 0, 0, &av);
	ret = fi_av_insert_auth_key(av, "k", 0, &key, 0);
	if (ret == -FI_ENOSYS)
		return conform_done(e, av, conform_refused(e, "fi_av_insert_auth_key", ret));
	return conform_done(e, av, ret == -FI_EINVAL ? V_PASS : FAIL("a key of size 0: %d", ret));
}

enum verdict auth_insert_keyed(struct env *e)
{
	fi_addr_t key, fi_addr[2];
	struct fid_av *av;
	int ret;

	OPEN_AV(FI_AV_TABLE, 0, 0, &av);
	ret = fi_av_insert_auth_key(av, "secret", 6, &key, 0);
	if (ret)
		return conform_done(e, av, conform_refused(e, "fi_av_insert_auth_key", ret));
	fi_addr[0] = fi_addr[1] = key;
	ret = conform_insert_n(e, av, 0, 2, fi_addr, FI_AUTH_KEY, NULL);
	if (ret < 0)
		return conform_done(e, av, conform_refused(e, "insert(FI_AUTH_KEY)", ret));
	if (ret != 2 || !conform_holds(e, av, fi_addr[0], 0) ||
	    !conform_holds(e, av, fi_addr[1], 1))
		return conform_done(e, av, FAIL("key handles in, fi_addrs out: %d", ret));
	return conform_done(e, av, V_PASS);
}

enum verdict auth_remove(struct env *e)
{
	char buf[16];
	fi_addr_t key;
	struct fid_av *av;
	size_t size = sizeof(buf);
	int ret;

	OPEN_AV(FI_AV_TABLE, 0, 0, &av);
	ret = fi_av_insert_auth_key(av, "secret", 6, &key, 0);
	if (ret)
		return conform_done(e, av, conform_refused(e, "fi_av_insert_auth_key", ret));
	ret = fi_av_remove(av, &key, 1, FI_AUTH_KEY);
	if (ret)
		return conform_done(e, av, conform_refused(e, "remove(FI_AUTH_KEY)", ret));
	ret = fi_av_lookup_auth_key(av, key, buf, &size);
	return conform_done(e, av,
			    ret == -FI_EINVAL ? V_PASS : FAIL("removed key looked up: %d", ret));
}

/* ---- named AVs ---- */

static void named(char *name, size_t len, const char *what)
{
	snprintf(name, len, "avconform_%s_%d", what, (int) getpid());
}

enum verdict named_open(struct env *e)
{
	struct fi_av_attr attr = {.type = FI_AV_MAP};
	struct fid_av *av;
	char name[64];
	int ret;

	named(name, sizeof(name), "open");
	attr.name = name;
	ret = fi_av_open(e->domain, &attr, &av, NULL);
	if (ret)
		return conform_refused(e, "fi_av_open(name)", ret);
	return conform_done(e, av, attr.map_addr ? V_PASS : FAIL("map_addr not reported"));
}

static enum verdict named_read(struct env *e, bool has_name)
{
	struct fi_av_attr attr = {.type = FI_AV_TABLE, .flags = FI_READ};
	struct fid_av *av;
	char name[64];
	int ret;

	named(name, sizeof(name), "missing");
	attr.name = has_name ? name : NULL;
	ret = fi_av_open(e->domain, &attr, &av, NULL);
	if (!ret)
		return conform_done(e, av,
				    FAIL("FI_READ %s opened",
					 has_name ? "of a missing name" : "without a name"));
	return V_PASS;
}

enum verdict named_read_noname(struct env *e)
{
	return named_read(e, false);
}

enum verdict named_read_missing(struct env *e)
{
	return named_read(e, true);
}

enum verdict named_shared(struct env *e)
{
	struct fi_av_attr attr = {.type = FI_AV_MAP};
	char name[64], why[CONFORM_WHY];
	fi_addr_t fi_addr[3];
	struct fid_av *av;
	int ret;

	named(name, sizeof(name), "shared");
	attr.name = name;
	ret = fi_av_open(e->domain, &attr, &av, NULL);
	if (ret)
		return conform_refused(e, "fi_av_open(name)", ret);
	ret = conform_insert_n(e, av, 0, 3, fi_addr, 0, NULL);
	if (ret != 3)
		return conform_done(e, av, FAIL("insert of 3: %d", ret));
	ret = conform_run_peer(e, name, fi_addr, 3, why, sizeof(why));
	return conform_done(e, av,
			    ret ? FAIL("%s", why[0] ? why : "the other process failed") : V_PASS);
}

enum verdict named_cleanup(struct env *e)
{
	struct fi_av_attr attr = {.type = FI_AV_TABLE};
	struct fid_av *av;
	char name[64];
	int ret;

	named(name, sizeof(name), "cleanup");
	attr.name = name;
	ret = fi_av_open(e->domain, &attr, &av, NULL);
	if (ret)
		return conform_refused(e, "fi_av_open(name)", ret);
	fi_close(&av->fid);
	attr.flags = FI_READ;
	ret = fi_av_open(e->domain, &attr, &av, NULL);
	return conform_done(e, ret ? NULL : av,
			    ret ? V_PASS : FAIL("still there after the last close"));
}

/* ---- the 1.20 interface ---- */

enum verdict ops_v120(struct env *e)
{
	struct fid_av *av;

	OPEN_AV(FI_AV_TABLE, 0, 0, &av);
	if (av->ops->size < sizeof(struct fi_layer_ops_av))
		return conform_done(e, av,
				    conform_unsupported(e,
							"fi_ops_av of %zu bytes: the 1.17 layout",
							av->ops->size));
	return conform_done(e, av, V_PASS);
}
