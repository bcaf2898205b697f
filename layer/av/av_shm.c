/*
 * Named address vectors (fi_av(3) `name`): one AV shared by the processes of a node, in a
 * POSIX shared memory object "/ofi_layer_av.<name>" mapped by every process that opens it.
 *
 * Layout of the object (its size is fixed when it is created: max(count, 1024) entries):
 *	0		fi_addr_t map[capacity]: entry i's fi_addr, FI_ADDR_NOTAVAIL if free.
 *			This is what map_addr points at (libfabric's own shared-AV test reads
 *			the fi_addr of entry i as ((fi_addr_t *) attr.map_addr)[i]).
 *	table_off	the util address table (util_av_table_attach), offsets only
 *	size - hdr	struct layer_av_shm_hdr, found from the object's size alone
 * fi_addr values do not depend on where a process maps the object: they are the same in every
 * process (TABLE indices, or MAP handles with the salt kept in the header).
 *
 * Concurrency between processes: writers hold a robust, process-shared mutex; lookups are
 * lock-free (util/av_table.h). A process that dies holding the mutex leaves it "owner dead":
 * the next locker repairs the table from its entries (always valid) and goes on.
 * Users are counted by pid and start time, so users that died are recognised and dropped;
 * the last user to close unlinks the object, and an object whose users are all dead is
 * unlinked by the next process that opens the name.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "layer/av/av.h"

#define LAYER_AV_SHM_MAGIC 0x6c61796572617631ULL /* "layerav1" */
/*
 * The shared format: this header, util_av_table's attached layout and its hash function.
 * Processes of different formats refuse each other's AV (-FI_EINVAL), so it changes
 * whenever any of them does. 2: hash chains start on a cache line, a shorter 16-byte hash.
 */
#define LAYER_AV_SHM_VERSION 2
#define LAYER_AV_SHM_PREFIX "/ofi_layer_av."
/* entries of a named AV: at least this many, whatever count says; at most the other */
#define LAYER_AV_SHM_MIN_COUNT 1024
#define LAYER_AV_SHM_MAX_COUNT ((size_t) 1 << 24)
/* processes that may have a named AV open at once */
#define LAYER_AV_SHM_MAX_USERS 256
/* how long an opener waits for the creator to finish setting the object up */
#define LAYER_AV_SHM_SETUP_MS 2000
#define LAYER_AV_SHM_OPEN_TRIES 8

struct layer_av_shm_user {
	int32_t pid;
	uint32_t reserved;
	uint64_t start_time; /* /proc/<pid>/stat starttime: tells a reused pid apart */
};

struct layer_av_shm_hdr {
	uint64_t magic;        /* written last by the creator (release) */
	uint32_t version;
	uint32_t addr_format;
	uint32_t addrlen;
	uint32_t type;         /* FI_AV_TABLE or FI_AV_MAP */
	int32_t rx_ctx_bits;
	uint32_t salt;
	uint64_t capacity;
	uint64_t size;         /* of the whole object */
	uint64_t table_off;
	uint64_t table_size;
	pthread_mutex_t lock;  /* robust, process-shared: writers */
	uint32_t is_unlinked;  /* the name is gone: an opener that mapped it must retry */
	uint32_t user_cnt;
	struct layer_av_shm_user users[LAYER_AV_SHM_MAX_USERS];
};

struct layer_av_shm {
	char name[NAME_MAX + 1];
	uint8_t *base;
	size_t size;
	struct layer_av_shm_hdr *hdr;
	fi_addr_t *map;
};

static size_t layer_av_shm_hdr_size(void)
{
	long page = sysconf(_SC_PAGESIZE);

	return (sizeof(struct layer_av_shm_hdr) + (size_t) page - 1) & ~((size_t) page - 1);
}

/* "/ofi_layer_av." + the name without leading slashes, inner slashes as '_'. */
static int layer_av_shm_name(const char *name, char *out, size_t len)
{
	size_t i, n;

	while (*name == '/')
		name++;
	n = strlen(name);
	if (!n || strlen(LAYER_AV_SHM_PREFIX) + n >= len || n > NAME_MAX - 16)
		return -FI_EINVAL;
	strcpy(out, LAYER_AV_SHM_PREFIX);
	for (i = 0; i < n; i++)
		out[strlen(LAYER_AV_SHM_PREFIX) + i] = name[i] == '/' ? '_' : name[i];
	out[strlen(LAYER_AV_SHM_PREFIX) + n] = '\0';
	return 0;
}

/* Field 22 of /proc/<pid>/stat; 0 when the process is gone. */
static uint64_t layer_av_proc_start(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long start = 0;
	FILE *f;
	int field;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int) pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	p = fgets(buf, sizeof(buf), f);
	fclose(f);
	/* the command name may hold spaces and parentheses: fields count from the last ')' */
	if (!p || !(p = strrchr(buf, ')')))
		return 0;
	for (field = 2; field < 22 && p; field++)
		p = strchr(p + 1, ' ');
	if (p)
		start = strtoull(p + 1, NULL, 10);
	return start;
}

static bool layer_av_shm_user_alive(const struct layer_av_shm_user *user)
{
	if (kill(user->pid, 0) && errno == ESRCH)
		return false;
	return layer_av_proc_start(user->pid) == user->start_time;
}

/* Drops users that died without closing (mutex held). */
static void layer_av_shm_prune(struct layer_av_shm_hdr *hdr)
{
	uint32_t i = 0;

	while (i < hdr->user_cnt) {
		if (layer_av_shm_user_alive(&hdr->users[i])) {
			i++;
			continue;
		}
		FI_INFO(&layer_prov, FI_LOG_AV, "named av: user %d is gone\n", hdr->users[i].pid);
		hdr->users[i] = hdr->users[--hdr->user_cnt];
	}
}

/* Entry i's fi_addr in the shared map, recomputed from the table (after a repair). */
static void layer_av_shm_rebuild_map(struct layer_av *av)
{
	size_t i;

	for (i = 0; i < av->shm->hdr->capacity; i++) {
		av->shm->map[i] = util_av_table_is_live(&av->table, i) ?
				  layer_av_index_to_fi_addr(av, i) : FI_ADDR_NOTAVAIL;
	}
}

/* Takes the robust mutex; repairs what a process that died holding it left half done. */
static int layer_av_shm_lock_hdr(struct layer_av *av, struct layer_av_shm_hdr *hdr,
				 bool has_table)
{
	int ret = pthread_mutex_lock(&hdr->lock);

	if (ret == EOWNERDEAD) {
		FI_WARN(&layer_prov, FI_LOG_AV, "named av %s: a process died while changing it; "
			"repairing\n", av->shm->name);
		if (has_table) {
			util_av_table_repair(&av->table);
			layer_av_shm_rebuild_map(av);
		}
		layer_av_shm_prune(hdr);
		pthread_mutex_consistent(&hdr->lock);
		return 0;
	}
	if (ret) {
		FI_WARN(&layer_prov, FI_LOG_AV, "named av %s: lock: %s\n", av->shm->name,
			strerror(ret));
		return -FI_EIO;
	}
	return 0;
}

void layer_av_shm_lock(struct layer_av *av)
{
	/* an unrecoverable mutex was already reported; the caller's change goes ahead */
	(void) layer_av_shm_lock_hdr(av, av->shm->hdr, true);
	util_av_table_refresh(&av->table);
}

void layer_av_shm_unlock(struct layer_av *av)
{
	pthread_mutex_unlock(&av->shm->hdr->lock);
}

void layer_av_shm_set_map(struct layer_av *av, size_t index, fi_addr_t fi_addr)
{
	__atomic_store_n(&av->shm->map[index], fi_addr, __ATOMIC_RELEASE);
}

static int layer_av_shm_add_user(struct layer_av_shm_hdr *hdr)
{
	struct layer_av_shm_user *user;

	if (hdr->user_cnt == LAYER_AV_SHM_MAX_USERS)
		return -FI_EBUSY;
	user = &hdr->users[hdr->user_cnt++];
	user->pid = getpid();
	user->start_time = layer_av_proc_start(getpid());
	return 0;
}

static void layer_av_shm_del_user(struct layer_av_shm_hdr *hdr)
{
	pid_t pid = getpid();
	uint32_t i;

	for (i = 0; i < hdr->user_cnt; i++) {
		if (hdr->users[i].pid == pid) {
			hdr->users[i] = hdr->users[--hdr->user_cnt];
			return;
		}
	}
}

/* Maps the object at want (if not NULL: exactly there) or wherever the system likes. */
static void *layer_av_shm_map(int fd, size_t size, void *want)
{
	void *base;

	if (want && ((uintptr_t) want & ((uintptr_t) sysconf(_SC_PAGESIZE) - 1)))
		return MAP_FAILED;
	base = mmap(want, size, PROT_READ | PROT_WRITE,
		    MAP_SHARED | (want ? MAP_FIXED_NOREPLACE : 0), fd, 0);
	if (base != MAP_FAILED && want && base != want) {
		munmap(base, size);
		return MAP_FAILED;
	}
	return base;
}

/* The creator's part: sizes, maps and sets up a new object, then publishes the magic. */
static int layer_av_shm_create(struct layer_av *av, int fd, const struct fi_av_attr *attr,
			       struct layer_av_shm *shm)
{
	size_t capacity = UTIL_MIN(UTIL_MAX(attr->count, (size_t) LAYER_AV_SHM_MIN_COUNT),
				   LAYER_AV_SHM_MAX_COUNT);
	size_t map_size = (capacity * sizeof(fi_addr_t) + 63) & ~(size_t) 63;
	size_t table_size = util_av_table_region_size(av->addrlen, capacity);
	size_t hdr_size = layer_av_shm_hdr_size();
	size_t size = (map_size + table_size + hdr_size + hdr_size - 1) & ~(hdr_size - 1);
	struct layer_av_shm_hdr *hdr;
	pthread_mutexattr_t mattr;
	size_t i;
	int ret;

	if (ftruncate(fd, (off_t) size))
		return -FI_ENOMEM;
	shm->base = layer_av_shm_map(fd, size, attr->map_addr);
	if (shm->base == MAP_FAILED)
		return attr->map_addr ? -FI_EADDRINUSE : -FI_ENOMEM;
	shm->size = size;
	hdr = (struct layer_av_shm_hdr *) (shm->base + size - sizeof(*hdr));
	hdr = (struct layer_av_shm_hdr *) ((uintptr_t) hdr & ~(uintptr_t) 63);
	shm->hdr = hdr;
	shm->map = (fi_addr_t *) shm->base;

	ret = util_av_table_attach(&av->table, shm->base + map_size, table_size, av->addrlen,
				   capacity, true);
	if (ret)
		return ret;
	for (i = 0; i < capacity; i++)
		shm->map[i] = FI_ADDR_NOTAVAIL;

	pthread_mutexattr_init(&mattr);
	pthread_mutexattr_setpshared(&mattr, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&mattr, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(&hdr->lock, &mattr);
	pthread_mutexattr_destroy(&mattr);

	hdr->version = LAYER_AV_SHM_VERSION;
	hdr->addr_format = av->domain->addr_format;
	hdr->addrlen = (uint32_t) av->addrlen;
	hdr->type = av->type;
	hdr->rx_ctx_bits = av->rx_ctx_bits;
	hdr->salt = av->salt;
	hdr->capacity = capacity;
	hdr->size = size;
	hdr->table_off = map_size;
	hdr->table_size = table_size;
	ret = layer_av_shm_add_user(hdr);
	if (ret)
		return ret;
	__atomic_store_n(&hdr->magic, LAYER_AV_SHM_MAGIC, __ATOMIC_RELEASE);
	return 0;
}

static void layer_av_shm_sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long) (ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

/*
 * An opener's part: maps an existing object once its creator is done, joins its users.
 * -FI_EAGAIN: the object went away meanwhile (the caller opens the name again).
 */
static int layer_av_shm_join(struct layer_av *av, int fd, const struct fi_av_attr *attr,
			     struct layer_av_shm *shm)
{
	struct layer_av_shm_hdr *hdr;
	struct stat st;
	unsigned waited;
	int ret;

	for (waited = 0;; waited++) {
		if (fstat(fd, &st))
			return -FI_EIO;
		if ((size_t) st.st_size >= layer_av_shm_hdr_size())
			break;
		if (waited >= LAYER_AV_SHM_SETUP_MS)
			return -FI_EIO;
		layer_av_shm_sleep_ms(1);
	}
	shm->size = (size_t) st.st_size;
	shm->base = layer_av_shm_map(fd, shm->size, attr->map_addr);
	if (shm->base == MAP_FAILED) {
		shm->base = NULL;
		return attr->map_addr ? -FI_EADDRINUSE : -FI_ENOMEM;
	}
	hdr = (struct layer_av_shm_hdr *) (shm->base + shm->size - sizeof(*hdr));
	hdr = (struct layer_av_shm_hdr *) ((uintptr_t) hdr & ~(uintptr_t) 63);
	shm->hdr = hdr;
	shm->map = (fi_addr_t *) shm->base;
	for (waited = 0; __atomic_load_n(&hdr->magic, __ATOMIC_ACQUIRE) != LAYER_AV_SHM_MAGIC;
	     waited++) {
		if (waited >= LAYER_AV_SHM_SETUP_MS)
			return -FI_EIO;
		layer_av_shm_sleep_ms(1);
	}
	if (hdr->version != LAYER_AV_SHM_VERSION || hdr->size != shm->size ||
	    hdr->table_off + hdr->table_size > hdr->size)
		return -FI_EINVAL;

	/*
	 * The table and the fi_addr layout first: if the lock turns out to be owner-dead, the
	 * repair needs both.
	 */
	av->type = hdr->type;
	layer_av_set_encoding(av, hdr->rx_ctx_bits, hdr->salt);
	ret = util_av_table_attach(&av->table, shm->base + hdr->table_off, hdr->table_size,
				   av->addrlen, hdr->capacity, false);
	if (ret)
		return ret;

	ret = layer_av_shm_lock_hdr(av, hdr, true);
	if (ret)
		return ret;
	layer_av_shm_prune(hdr);
	if (hdr->is_unlinked || !hdr->user_cnt) {
		/* closed by its last user, or every user died: the name is stale */
		if (!hdr->is_unlinked) {
			hdr->is_unlinked = 1;
			shm_unlink(shm->name);
		}
		pthread_mutex_unlock(&hdr->lock);
		return -FI_EAGAIN;
	}
	if (hdr->addr_format != av->domain->addr_format || hdr->addrlen != av->addrlen ||
	    (attr->type != FI_AV_UNSPEC && hdr->type != (uint32_t) attr->type) ||
	    hdr->rx_ctx_bits != attr->rx_ctx_bits) {
		FI_WARN(&layer_prov, FI_LOG_AV, "named av %s: opened with other attributes "
			"(format, type or rx_ctx_bits)\n", shm->name);
		pthread_mutex_unlock(&hdr->lock);
		return -FI_EINVAL;
	}
	ret = layer_av_shm_add_user(hdr);
	pthread_mutex_unlock(&hdr->lock);
	return ret;
}

int layer_av_shm_open(struct layer_av *av, struct fi_av_attr *attr)
{
	bool is_read = attr->flags & FI_READ;
	struct layer_av_shm *shm;
	int fd, ret, tries;

	shm = calloc(1, sizeof(*shm));
	if (!shm)
		return -FI_ENOMEM;
	ret = layer_av_shm_name(attr->name, shm->name, sizeof(shm->name));
	if (ret) {
		FI_WARN(&layer_prov, FI_LOG_AV, "open: av name \"%s\" is not usable\n", attr->name);
		goto err_free;
	}
	av->shm = shm;

	for (tries = 0; tries < LAYER_AV_SHM_OPEN_TRIES; tries++) {
		fd = is_read ? -1 : shm_open(shm->name, O_RDWR | O_CREAT | O_EXCL, 0600);
		if (fd >= 0) {
			ret = layer_av_shm_create(av, fd, attr, shm);
			close(fd);
			if (ret)
				shm_unlink(shm->name);
			break;
		}
		if (!is_read && errno != EEXIST) {
			ret = -FI_EIO;
			break;
		}
		fd = shm_open(shm->name, O_RDWR, 0);
		if (fd < 0) {
			/* FI_READ: "the AV must exist"; otherwise it went away: create it */
			ret = is_read ? -FI_ENOENT : -FI_EAGAIN;
			if (is_read)
				FI_WARN(&layer_prov, FI_LOG_AV,
					"open: FI_READ of %s, which does not exist\n",
					attr->name);
		} else {
			ret = layer_av_shm_join(av, fd, attr, shm);
			close(fd);
		}
		if (ret != -FI_EAGAIN)
			break;
		if (shm->base)
			munmap(shm->base, shm->size);
		shm->base = NULL;
		memset(&av->table, 0, sizeof(av->table));
	}
	if (ret)
		goto err_unmap;

	av->is_read_only = is_read;
	util_av_table_refresh(&av->table);
	/* fi_av(3): the map_addr used is returned when the caller gave none */
	if (!attr->map_addr)
		attr->map_addr = shm->map;
	return 0;

err_unmap:
	if (shm->base)
		munmap(shm->base, shm->size);
	av->shm = NULL;
	memset(&av->table, 0, sizeof(av->table));
err_free:
	free(shm);
	return ret;
}

void layer_av_shm_close(struct layer_av *av)
{
	struct layer_av_shm *shm = av->shm;
	struct layer_av_shm_hdr *hdr = shm->hdr;

	if (!layer_av_shm_lock_hdr(av, hdr, true)) {
		layer_av_shm_del_user(hdr);
		layer_av_shm_prune(hdr);
		/* the last user out cleans up */
		if (!hdr->user_cnt && !hdr->is_unlinked) {
			hdr->is_unlinked = 1;
			shm_unlink(shm->name);
		}
		pthread_mutex_unlock(&hdr->lock);
	}
	util_av_table_fini(&av->table);
	munmap(shm->base, shm->size);
	free(shm);
	av->shm = NULL;
}
