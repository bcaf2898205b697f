/*
 * The address flow of libfabric's own test programs (fabtests): a server takes its fabric
 * address from fi_getinfo(node, service, FI_SOURCE) with a port of its choosing; a client
 * calls fi_getinfo(node, service, 0) and inserts the info's dest_addr into its AV. Checks
 * that dest_addr is that server's endpoint address, and that both sides can send first:
 * the server's own connections must not try to take its listening port.
 *
 * Over shm, whose addresses are names, there is no port: skipped.
 */
#include "common.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ports tried for the server until one is free */
#define PORT_TRIES 20

static unsigned random_port(void)
{
	return 20000 + (unsigned) (rand() % 40000);
}

/* fi_getinfo for node 127.0.0.1 and port, as a source (server) or destination (client). */
static int getinfo_port(struct fi_info *hints, unsigned port, uint64_t flags,
			struct fi_info **info)
{
	char service[16];

	snprintf(service, sizeof(service), "%u", port);
	return fi_getinfo(LT_FI_VERSION, LT_NODE, service, flags, hints, info);
}

static bool exchange(struct lt_ep *from, fi_addr_t dest, struct lt_ep *to, const char *what)
{
	char sbuf[64], rbuf[64];
	struct fi_context2 sctx, rctx;
	struct lt_comp comp;
	bool ok, done;

	memset(sbuf, 0, sizeof(sbuf));
	snprintf(sbuf, sizeof(sbuf), "%s", what);
	memset(rbuf, 0, sizeof(rbuf));
	ok = LT_CHECK_RET(lt_recv(to, rbuf, sizeof(rbuf), FI_ADDR_UNSPEC, &rctx), 0,
			  "%s: fi_recv", what) &&
	     LT_CHECK_RET(lt_send(from, sbuf, sizeof(sbuf), dest, &sctx), 0, "%s: fi_send", what);
	if (!ok)
		return false;
	done = lt_cq_next(&from->tx, &comp, LT_TIMEOUT_MS);
	ok = LT_CHECK(done && !comp.err, "%s: send completes without error (err %d)", what,
		      done ? comp.err : -1);
	done = lt_cq_next(&to->rx, &comp, LT_TIMEOUT_MS);
	ok &= LT_CHECK(done && !comp.err && !strcmp(rbuf, what), "%s: message arrives", what);
	return ok;
}

int main(int argc, char **argv)
{
	struct fi_info *hints, *sinfo = NULL, *cinfo = NULL;
	struct lt_dom sdom, cdom;
	struct lt_ep server, client;
	fi_addr_t to_server, to_client;
	struct sockaddr_in *sin;
	unsigned port = 0;
	int i, ret;

	(void) argc;
	lt_begin(argv[0]);
	srand((unsigned) getpid());
	if (!strcasecmp(lt_core_name(), "shm"))
		lt_skip("shm addresses are names: no port to choose");
	hints = lt_hints(FI_MSG);
	hints->addr_format = FI_SOCKADDR_IN;

	/* the server's endpoint at a port it chose: another program may hold one, try again */
	for (i = 0; i < PORT_TRIES; i++) {
		port = random_port();
		ret = getinfo_port(hints, port, FI_SOURCE, &sinfo);
		if (ret == -FI_ENODATA)
			lt_skip("no IPv4 info for the provider under test");
		if (!LT_CHECK_RET(ret, 0, "server: fi_getinfo(127.0.0.1, %u, FI_SOURCE)", port))
			return lt_end();
		ret = lt_dom_open(sinfo, &sdom);
		if (!ret)
			ret = lt_ep_open(&sdom, NULL, &server);
		if (ret != -FI_EADDRINUSE)
			break;
		lt_dom_close(&sdom);
		fi_freeinfo(sinfo);
		sinfo = NULL;
	}
	if (!LT_CHECK_RET(ret, 0, "server: endpoint on port %u", port))
		return lt_end();
	sin = (struct sockaddr_in *) server.addr;
	LT_CHECK(server.addrlen == sizeof(*sin) && sin->sin_family == AF_INET &&
			 ntohs(sin->sin_port) == port,
		 "server: its name is 127.0.0.1:%u (port %u)", port, ntohs(sin->sin_port));

	/* the client finds the server through fi_getinfo's dest_addr */
	ret = getinfo_port(hints, port, 0, &cinfo);
	if (!LT_CHECK_RET(ret, 0, "client: fi_getinfo(127.0.0.1, %u, 0)", port))
		return lt_end();
	LT_CHECK(cinfo->dest_addr && cinfo->dest_addrlen == server.addrlen &&
			 !memcmp(cinfo->dest_addr, server.addr, server.addrlen),
		 "client: dest_addr is the server's name (%zu bytes)", cinfo->dest_addrlen);
	/* the client's own address is its provider's choice: no FI_SOURCE port */
	ret = lt_dom_open(cinfo, &cdom);
	if (!ret)
		ret = lt_ep_open(&cdom, NULL, &client);
	if (!LT_CHECK_RET(ret, 0, "client: endpoint"))
		return lt_end();

	ret = fi_av_insert(client.av, cinfo->dest_addr, 1, &to_server, 0, NULL);
	LT_CHECK_RET(ret, 1, "client: fi_av_insert of dest_addr");
	ret = lt_av_insert(&server, client.addr, &to_client);
	LT_CHECK_RET(ret, 0, "server: inserts the client");
	/* the server first: its connection must not bind to its listening port */
	exchange(&server, to_client, &client, "server sends first");
	exchange(&client, to_server, &server, "client answers");
	exchange(&client, to_server, &server, "client sends again");
	exchange(&server, to_client, &client, "server answers");

	lt_ep_close(&client);
	lt_ep_close(&server);
	lt_dom_close(&cdom);
	lt_dom_close(&sdom);
	fi_freeinfo(cinfo);
	fi_freeinfo(sinfo);
	fi_freeinfo(hints);
	return lt_end();
}
