/*
 * nfsload: one NFS client worker for the test traces (see README.md).
 *
 * Built on libnfs 4.0 (Debian 12: libnfs-dev), mostly its synchronous
 * high-level API; the few NFSv3 procedures that API never sends (READDIR,
 * PATHCONF, and an explicit NULL) go through libnfs's raw async API on the
 * same connection.
 *
 *   nfsload SERVER EXPORT VERSION WORKER NFILES NOPS RATE SEED MAXSECS
 *
 * Worker N works under /wN of the export:
 *   1. a tree: /wN, /wN/d0..d2, /wN/dI/s0..s1 (10 directories)
 *   2. one pass over the procedures the traces must hold, including expected
 *      failures (LOOKUP of a missing name, MKDIR of an existing directory,
 *      RMDIR of a non-empty one)
 *   3. NFILES files, even-numbered with pseudo-random bytes, odd-numbered all
 *      zeros (file 1 of every worker is zero001.img), each fsync'd, then all
 *      read back and checked
 *   4. NOPS paced (RATE per second) random operations
 *   5. deletes about a quarter of the files, lists the tree, unmounts
 * Everything depends on SEED and WORKER only, except timing.  Every phase is
 * bounded by MAXSECS as well.  Exit status: 0 ok, 1 setup/verify/coverage
 * failure, 2 usage.  Failures in phase 4 are counted and printed only.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <nfsc/libnfs.h>
#include <nfsc/libnfs-raw.h>
#include <nfsc/libnfs-raw-nfs.h>

/* libnfs's public headers leave struct nfs_fh opaque; this is its layout
 * in libnfs 4.0 (libnfs-private.h). Checked at run time (length 1..64). */
struct nfs_fh {
    int len;
    char *val;
};

#define MAXFILES 64
#define NDIRS 10

static struct nfs_context *nfs;
static int V, W;
static uint64_t SEED;
static double deadline;
static size_t WCHUNK, RCHUNK;
static char *wbuf, *rbuf, *ebuf;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

/* splitmix64 */
static uint64_t mix(uint64_t a, uint64_t b)
{
    uint64_t z = a + 0x9E3779B97F4A7C15ULL * (b + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static uint64_t rnd(uint64_t *s) { return mix(*s += 0x632BE59BD9B4E019ULL, 0); }
static double urand(uint64_t *s) { return (rnd(s) >> 11) * (1.0 / 9007199254740992.0); }

/* Content of file `key` at `off` (a multiple of 8): zeros, or a keyed
 * counter-mode stream, so any aligned range can be regenerated. */
static void fill(int zero, uint64_t key, uint64_t off, char *buf, size_t len)
{
    if (zero) {
        memset(buf, 0, len);
        return;
    }
    for (size_t i = 0; i < len; i += 8) {
        uint64_t v = mix(SEED ^ (key << 20), (off + i) / 8);
        memcpy(buf + i, &v, len - i < 8 ? len - i : 8);
    }
}

/* ---- statistics ---- */
enum { OP_MKDIR, OP_CREATE, OP_WRITE, OP_FSYNC, OP_READ, OP_VERIFY, OP_STAT, OP_LSTAT, OP_ACCESS, OP_LIST,
       OP_SMALLREAD, OP_OVERWRITE, OP_TRUNC, OP_CHMOD, OP_UTIMES, OP_RENAME, OP_TMPFILE, OP_SYMLINK, OP_LINK,
       OP_MKRMDIR, OP_STATVFS, OP_MKNOD, OP_RAW, OP_PROBE, OP_UNLINK, OP_RMDIR, OP_N };
static const char *opname[OP_N] = { "mkdir", "create", "write", "fsync", "read", "verify", "stat", "lstat",
    "access", "list", "smallread", "overwrite", "truncate", "chmod", "utimes", "rename", "tmpfile", "symlink",
    "link", "mkrmdir", "statvfs", "mknod", "raw", "probe", "unlink", "rmdir" };
static long ok[OP_N], bad[OP_N];
static char lasterr[OP_N][120];

static int res(int op, int r)
{
    if (r < 0) {
        bad[op]++;
        snprintf(lasterr[op], sizeof lasterr[op], "%s", nfs_get_error(nfs));
    } else {
        ok[op]++;
    }
    return r;
}

/* ---- raw NFSv3 calls on the mount's own connection ---- */
struct raw {
    int done, status, nfsstat, eof, entries;
    uint64_t cookie;
    cookieverf3 verf;
};

static int raw_wait(struct rpc_context *rpc, struct raw *r)
{
    double end = now() + 15;
    while (!r->done) {
        if (now() > end)
            return -1;
        struct pollfd p = { .fd = rpc_get_fd(rpc), .events = rpc_which_events(rpc) };
        if (poll(&p, 1, 100) < 0 && errno != EINTR)
            return -1;
        if (rpc_service(rpc, p.revents) < 0)
            return -1;
    }
    return r->status == RPC_STATUS_SUCCESS ? 0 : -1;
}

static void null_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
    struct raw *r = priv;
    (void)rpc; (void)data;
    r->status = status;
    r->done = 1;
}

static void readdir_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
    struct raw *r = priv;
    (void)rpc;
    r->status = status;
    if (status == RPC_STATUS_SUCCESS) {
        READDIR3res *res = data;
        r->nfsstat = res->status;
        if (res->status == NFS3_OK) {
            READDIR3resok *okr = &res->READDIR3res_u.resok;
            for (entry3 *e = okr->reply.entries; e; e = e->nextentry) {
                r->entries++;
                r->cookie = e->cookie;
            }
            r->eof = okr->reply.eof;
            memcpy(r->verf, okr->cookieverf, sizeof r->verf);
        }
    }
    r->done = 1;
}

static void pathconf_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
    struct raw *r = priv;
    (void)rpc;
    r->status = status;
    if (status == RPC_STATUS_SUCCESS)
        r->nfsstat = ((PATHCONF3res *)data)->status;
    r->done = 1;
}

/* Opens `path` (a directory or a file) to learn its NFSv3 handle. */
static struct nfsfh *open_fh(const char *path, nfs_fh3 *out)
{
    struct nfsfh *fh;
    if (nfs_open(nfs, path, O_RDONLY, &fh) < 0)
        return NULL;
    struct nfs_fh *h = nfs_get_fh(fh);
    if (!h || h->len < 1 || h->len > 64) {
        fprintf(stderr, "w%d: unexpected file handle layout\n", W);
        exit(1);
    }
    out->data.data_len = h->len;
    out->data.data_val = h->val;
    return fh;
}

static int raw_null(void)
{
    struct rpc_context *rpc = nfs_get_rpc_context(nfs);
    struct raw r = { 0 };
    if (rpc_nfs3_null_async(rpc, null_cb, &r) < 0)
        return -1;
    return raw_wait(rpc, &r);
}

/* READDIR (names only) of a whole directory, `count` bytes per reply, so a
 * directory with many entries takes several calls with cookies. */
static int raw_readdir(const char *dir, unsigned count)
{
    struct rpc_context *rpc = nfs_get_rpc_context(nfs);
    READDIR3args a;
    memset(&a, 0, sizeof a);
    struct nfsfh *fh = open_fh(dir, &a.dir);
    if (!fh)
        return -1;
    struct raw r = { 0 };
    int rc = 0;
    for (int calls = 0; calls < 64 && !r.eof && rc == 0; calls++) {
        a.cookie = r.cookie;
        memcpy(a.cookieverf, r.verf, sizeof a.cookieverf);
        a.count = count;
        r.done = 0;
        if (rpc_nfs3_readdir_async(rpc, readdir_cb, &a, &r) < 0 || raw_wait(rpc, &r) < 0 || r.nfsstat != NFS3_OK)
            rc = -1;
    }
    nfs_close(nfs, fh);
    return rc;
}

static int raw_pathconf(const char *path)
{
    struct rpc_context *rpc = nfs_get_rpc_context(nfs);
    PATHCONF3args a;
    memset(&a, 0, sizeof a);
    struct nfsfh *fh = open_fh(path, &a.object);
    if (!fh)
        return -1;
    struct raw r = { 0 };
    int rc = 0;
    if (rpc_nfs3_pathconf_async(rpc, pathconf_cb, &a, &r) < 0 || raw_wait(rpc, &r) < 0 || r.nfsstat != NFS3_OK)
        rc = -1;
    nfs_close(nfs, fh);
    return rc;
}

/* ---- files ---- */
struct file {
    char path[96];
    uint64_t size, key;
    int zero, alive;
};
static struct file F[MAXFILES];
static int NF;
static char DIRS[NDIRS][48];
static char base[16];

static uint64_t plan_size(int i)
{
    uint64_t s = mix(SEED, 1000 + W * 100 + i);
    double u = urand(&s);
    if (i == 1 && W == 0)
        return 2u << 20;                                  /* one 2 MiB zero file */
    if (i % 2)
        return (uint64_t)(1024 * pow(1024.0, u * u));     /* zeros: 1 KiB .. 1 MiB */
    return (uint64_t)(1024 * pow(256.0, u * u));          /* random: 1 KiB .. 256 KiB */
}

static int write_file(struct file *f)
{
    struct nfsfh *fh;
    if (res(OP_CREATE, nfs_open2(nfs, f->path, O_CREAT | O_WRONLY | O_TRUNC, 0644, &fh)) < 0)
        return -1;
    int rc = 0;
    for (uint64_t off = 0; off < f->size && rc == 0;) {
        size_t n = f->size - off < WCHUNK ? f->size - off : WCHUNK;
        fill(f->zero, f->key, off, wbuf, n);
        int w = nfs_pwrite(nfs, fh, off, n, wbuf);
        if (res(OP_WRITE, w <= 0 ? -1 : 0) < 0)
            rc = -1;
        else
            off += w;
    }
    if (res(OP_FSYNC, nfs_fsync(nfs, fh)) < 0)
        rc = -1;
    nfs_close(nfs, fh);
    return rc;
}

static int read_verify(struct file *f)
{
    struct nfsfh *fh;
    if (res(OP_READ, nfs_open(nfs, f->path, O_RDONLY, &fh)) < 0)
        return -1;
    int good = 1;
    uint64_t off = 0;
    while (off < f->size) {
        size_t n = f->size - off < RCHUNK ? f->size - off : RCHUNK;
        int got = nfs_pread(nfs, fh, off, n, rbuf);
        if (res(OP_READ, got <= 0 ? -1 : 0) < 0) {
            good = 0;
            break;
        }
        fill(f->zero, f->key, off, ebuf, got);
        if (memcmp(rbuf, ebuf, got))
            good = 0;
        off += got;
    }
    nfs_close(nfs, fh);
    if (good)
        ok[OP_VERIFY]++;
    else {
        bad[OP_VERIFY]++;
        snprintf(lasterr[OP_VERIFY], sizeof lasterr[OP_VERIFY], "content mismatch in %.80s", f->path);
    }
    return good ? 0 : -1;
}

static int list_dir(const char *d)
{
    struct nfsdir *dir;
    if (res(OP_LIST, nfs_opendir(nfs, d, &dir)) < 0)
        return -1;
    for (int n = 0; n < 10000 && nfs_readdir(nfs, dir); n++)
        ;
    nfs_closedir(nfs, dir);
    return 0;
}

static struct file *pick(uint64_t *s)
{
    for (int t = 0; t < 64; t++) {
        struct file *f = &F[rnd(s) % NF];
        if (f->alive)
            return f;
    }
    return NULL;
}

/* expected failures: each must fail with the given errno */
static int expect(int r, int err)
{
    if (r == -err) {
        ok[OP_PROBE]++;
        return 0;
    }
    bad[OP_PROBE]++;
    snprintf(lasterr[OP_PROBE], sizeof lasterr[OP_PROBE], "expected -%d, got %d", err, r);
    return -1;
}

static int mknod_fifo(const char *path)
{
    int r = nfs_mknod(nfs, path, S_IFIFO | 0644, 0);
    if (r == 0)
        r = nfs_unlink(nfs, path);
    return r;
}

/* Phase 2: every procedure once, whatever phase 4's dice say.  STEP(cond)
 * counts and names a step whose condition says it went wrong. */
#define STEP(bad)                                                                        \
    do {                                                                                 \
        if (bad) {                                                                       \
            fails++;                                                                     \
            fprintf(stderr, "w%d: coverage step failed: %s (%s)\n", W, #bad, nfs_get_error(nfs)); \
        }                                                                                \
    } while (0)

static int coverage(void)
{
    char a[96], b[96], c[96];
    struct nfs_stat_64 st;
    struct statvfs sv;
    struct timeval tv[2] = { { 1700000000, 0 }, { 1700000000 + W, 500000 } };
    struct nfsfh *fh;
    int fails = 0;
    snprintf(a, sizeof a, "%s/cover.txt", base);
    snprintf(b, sizeof b, "%s/cover-link", base);

    STEP(nfs_create(nfs, a, O_RDWR, 0644, &fh) < 0);             /* CREATE */
    if (fails == 0) {
        STEP(nfs_pwrite(nfs, fh, 0, 11, "cover file\n") != 11);  /* WRITE */
        STEP(nfs_fsync(nfs, fh) < 0);                          /* COMMIT */
        STEP(nfs_fstat64(nfs, fh, &st) < 0);                   /* GETATTR */
        STEP(nfs_pread(nfs, fh, 0, 64, rbuf) != 11);           /* READ */
        nfs_close(nfs, fh);
    }
    STEP(nfs_access(nfs, a, R_OK | W_OK) < 0);                 /* ACCESS */
    STEP(nfs_chmod(nfs, a, 0640) < 0);                         /* SETATTR */
    STEP(nfs_utimes(nfs, a, tv) < 0);
    STEP(nfs_truncate(nfs, a, 4) < 0);
    STEP(nfs_symlink(nfs, "cover.txt", b) < 0);                /* SYMLINK */
    STEP(nfs_readlink(nfs, b, c, sizeof c) < 0);               /* READLINK */
    STEP(nfs_unlink(nfs, b) < 0);                              /* REMOVE */
    STEP(nfs_link(nfs, a, b) < 0);                             /* LINK */
    snprintf(c, sizeof c, "%s/cover-renamed", DIRS[1]);
    STEP(nfs_rename(nfs, b, c) < 0);                           /* RENAME */
    STEP(nfs_unlink(nfs, c) < 0);
    snprintf(c, sizeof c, "%s/cover-fifo", base);
    if (V == 3)                                                /* libnfs 4.0 has no NFSv4 MKNOD */
        STEP(mknod_fifo(c) < 0);                               /* MKNOD */
    STEP(nfs_statvfs(nfs, base, &sv) < 0);                     /* FSSTAT */
    STEP(list_dir(base) < 0);                                  /* READDIRPLUS */
    snprintf(c, sizeof c, "%s/cover-dir", base);
    STEP(nfs_mkdir2(nfs, c, 0755) < 0);                        /* MKDIR */
    STEP(nfs_rmdir(nfs, c) < 0);                               /* RMDIR */
    if (V == 3) {
        STEP(raw_null() < 0);                                  /* NULL */
        STEP(raw_readdir(base, 512) < 0);                      /* READDIR */
        STEP(raw_pathconf(a) < 0);                             /* PATHCONF */
    }
    snprintf(c, sizeof c, "%s/missing.lock", base);
    STEP(expect(nfs_stat64(nfs, c, &st), ENOENT) < 0);         /* LOOKUP -> NOENT */
    STEP(expect(nfs_mkdir2(nfs, DIRS[1], 0755), EEXIST) < 0);  /* MKDIR -> EXIST */
    STEP(expect(nfs_rmdir(nfs, base), ENOTEMPTY) < 0);         /* RMDIR -> NOTEMPTY */
    STEP(nfs_unlink(nfs, a) < 0);
    return fails ? -1 : 0;
}

/* Phase 4: one random operation. */
static void churn_op(uint64_t *s, long iter)
{
    struct file *f = pick(s);
    if (!f)
        return;
    int k = rnd(s) % 100;
    struct nfs_stat_64 st;
    struct nfsfh *fh;
    char tmp[128], tmp2[128];
    int r;

    if (k < 20) {
        res(OP_STAT, nfs_stat64(nfs, f->path, &st));
    } else if (k < 24) {
        res(OP_LSTAT, nfs_lstat64(nfs, f->path, &st));
    } else if (k < 28) {
        res(OP_ACCESS, nfs_access(nfs, f->path, R_OK));
    } else if (k < 40) {
        list_dir(rnd(s) % 4 ? DIRS[rnd(s) % NDIRS] : base);
    } else if (k < 47) {                                      /* read of the first bytes */
        r = nfs_open(nfs, f->path, O_RDONLY, &fh);
        if (r == 0) {
            size_t n = 512 + rnd(s) % 8192;
            r = nfs_pread(nfs, fh, 0, n < RCHUNK ? n : RCHUNK, rbuf);
            nfs_close(nfs, fh);
        }
        res(OP_SMALLREAD, r);
    } else if (k < 51) {                                      /* overwrite a region in place */
        r = nfs_open(nfs, f->path, O_WRONLY, &fh);
        if (r == 0) {
            size_t n = 256 + rnd(s) % 2048;
            uint64_t off = f->size > n ? (rnd(s) % (f->size - n)) & ~7ULL : 0;
            fill(f->zero, f->key + 7919 * (iter + 1), off, wbuf, n);
            r = nfs_pwrite(nfs, fh, off, n, wbuf);
            if (r >= 0 && off + n > f->size)
                f->size = off + n;
            nfs_close(nfs, fh);
        }
        res(OP_OVERWRITE, r);
    } else if (k < 53) {                                      /* shrink or extend */
        uint64_t ns = rnd(s) % 2 ? f->size + 4096 : f->size - f->size / 8;
        r = nfs_open(nfs, f->path, O_RDWR, &fh);
        if (r == 0) {
            r = nfs_ftruncate(nfs, fh, ns);
            if (r == 0)
                f->size = ns;
            nfs_close(nfs, fh);
        }
        res(OP_TRUNC, r);
    } else if (k < 56) {
        res(OP_CHMOD, nfs_chmod(nfs, f->path, rnd(s) % 2 ? 0644 : 0664));
    } else if (k < 59) {
        struct timeval tv[2] = { { 1700000000 + (long)(rnd(s) % 86400000), 0 }, { 0, 0 } };
        tv[1] = tv[0];
        res(OP_UTIMES, nfs_utimes(nfs, f->path, tv));
    } else if (k < 63) {                                      /* rename away and back */
        snprintf(tmp, sizeof tmp, "%s.old", f->path);
        r = nfs_rename(nfs, f->path, tmp);
        if (r == 0)
            r = nfs_rename(nfs, tmp, f->path);
        res(OP_RENAME, r);
    } else if (k < 69) {                                      /* temp file: create, write, stat, remove */
        snprintf(tmp, sizeof tmp, "%s/.tmp-%ld", DIRS[rnd(s) % NDIRS], iter);
        r = nfs_open2(nfs, tmp, O_CREAT | O_WRONLY | O_TRUNC, 0600, &fh);
        if (r == 0) {
            int n = snprintf(wbuf, 256, "worker %d op %ld seed %llu\n", W, iter, (unsigned long long)SEED);
            r = nfs_pwrite(nfs, fh, 0, n, wbuf);
            nfs_close(nfs, fh);
            if (r >= 0)
                r = nfs_stat64(nfs, tmp, &st);
            int r2 = nfs_unlink(nfs, tmp);
            if (r >= 0)
                r = r2;
        }
        res(OP_TMPFILE, r);
    } else if (k < 72) {                                      /* symlink, readlink, remove */
        snprintf(tmp, sizeof tmp, "%s/.lnk-%ld", DIRS[rnd(s) % NDIRS], iter);
        r = nfs_symlink(nfs, f->path, tmp);
        if (r == 0) {
            r = nfs_readlink(nfs, tmp, tmp2, sizeof tmp2);
            int r2 = nfs_unlink(nfs, tmp);
            if (r == 0)
                r = r2;
        }
        res(OP_SYMLINK, r);
    } else if (k < 74) {                                      /* hard link, remove */
        snprintf(tmp, sizeof tmp, "%s.hard", f->path);
        r = nfs_link(nfs, f->path, tmp);
        if (r == 0)
            r = nfs_unlink(nfs, tmp);
        res(OP_LINK, r);
    } else if (k < 76) {
        snprintf(tmp, sizeof tmp, "%s/tmpdir-%ld", DIRS[rnd(s) % NDIRS], iter);
        r = nfs_mkdir2(nfs, tmp, 0700);
        if (r == 0)
            r = nfs_rmdir(nfs, tmp);
        res(OP_MKRMDIR, r);
    } else if (k < 78) {
        struct statvfs sv;
        res(OP_STATVFS, nfs_statvfs(nfs, base, &sv));
    } else if (k < 81) {                                      /* fstat + fsync */
        r = nfs_open(nfs, f->path, O_RDWR, &fh);
        if (r == 0) {
            r = nfs_fstat64(nfs, fh, &st);
            int r2 = nfs_fsync(nfs, fh);
            if (r == 0)
                r = r2;
            nfs_close(nfs, fh);
        }
        res(OP_FSYNC, r);
    } else if (k < 85) {                                      /* expected failures */
        int j = rnd(s) % 4;
        if (j < 2) {
            snprintf(tmp, sizeof tmp, "%s.lock", f->path);
            expect(nfs_stat64(nfs, tmp, &st), ENOENT);
        } else if (j == 2) {
            expect(nfs_mkdir2(nfs, DIRS[rnd(s) % NDIRS], 0755), EEXIST);
        } else {
            expect(nfs_rmdir(nfs, base), ENOTEMPTY);
        }
    } else if (k < 88) {                                      /* raw READDIR / PATHCONF / NULL */
        if (V == 3) {
            int j = rnd(s) % 3;
            r = j == 0 ? raw_readdir(DIRS[rnd(s) % NDIRS], 256 + rnd(s) % 1024)
              : j == 1 ? raw_pathconf(f->path) : raw_null();
            res(OP_RAW, r);
        } else {
            list_dir(DIRS[rnd(s) % NDIRS]);
        }
    } else if (k < 90) {
        snprintf(tmp, sizeof tmp, "%s/.fifo-%ld", DIRS[rnd(s) % NDIRS], iter);
        if (V == 3)
            res(OP_MKNOD, mknod_fifo(tmp));
        else
            res(OP_STAT, nfs_stat64(nfs, f->path, &st));
    } else {                                                  /* "ls -l": stat the files of one directory */
        int d = rnd(s) % (NDIRS - 1);
        for (int i = d; i < NF; i += NDIRS - 1)
            if (F[i].alive)
                res(OP_STAT, nfs_stat64(nfs, F[i].path, &st));
    }
}

int main(int argc, char **argv)
{
    if (argc != 10) {
        fprintf(stderr, "usage: %s SERVER EXPORT VERSION WORKER NFILES NOPS RATE SEED MAXSECS\n", argv[0]);
        return 2;
    }
    const char *server = argv[1], *export = argv[2];
    V = atoi(argv[3]);
    W = atoi(argv[4]);
    NF = atoi(argv[5]);
    long nops = atol(argv[6]);
    double rate = atof(argv[7]);
    SEED = strtoull(argv[8], NULL, 0);
    double t0 = now();
    deadline = t0 + atof(argv[9]);
    if ((V != 3 && V != 4) || W < 0 || NF < 2 || NF > MAXFILES || nops < 0 || rate <= 0) {
        fprintf(stderr, "bad arguments\n");
        return 2;
    }
    /* libnfs 4.0 cannot encode an NFSv4 WRITE of more than 3944 bytes */
    WCHUNK = V == 4 ? 3584 : 32768;
    RCHUNK = 131072;
    wbuf = malloc(WCHUNK > 4096 ? WCHUNK : 4096);
    rbuf = malloc(RCHUNK);
    ebuf = malloc(RCHUNK);

    snprintf(base, sizeof base, "/w%d", W);
    int nd = 0;
    snprintf(DIRS[nd++], sizeof DIRS[0], "%s", base);
    for (int i = 0; i < 3; i++) {
        snprintf(DIRS[nd++], sizeof DIRS[0], "%s/d%d", base, i);
        for (int j = 0; j < 2; j++)
            snprintf(DIRS[nd++], sizeof DIRS[0], "%s/d%d/s%d", base, i, j);
    }
    uint64_t tot[2] = { 0, 0 };
    for (int i = 0; i < NF; i++) {
        struct file *f = &F[i];
        f->zero = i % 2;
        f->size = plan_size(i);
        f->key = W * 1000 + i;
        snprintf(f->path, sizeof f->path, "%s/%s%03d.%s", DIRS[1 + i % (NDIRS - 1)], f->zero ? "zero" : "data", i,
                 f->zero ? "img" : "bin");
        tot[f->zero] += f->size;
    }
    if (getenv("NFSLOAD_PLAN")) {            /* print the file plan only */
        for (int i = 0; i < NF; i++)
            printf("%s %llu\n", F[i].path, (unsigned long long)F[i].size);
        printf("# worker %d: random %llu B, zeros %llu B\n", W, (unsigned long long)tot[0],
               (unsigned long long)tot[1]);
        return 0;
    }

    nfs = nfs_init_context();
    if (!nfs)
        return 1;
    nfs_set_timeout(nfs, 15000);
    nfs_set_version(nfs, V);
    if (nfs_mount(nfs, server, export)) {
        fprintf(stderr, "w%d: mount %s:%s v%d: %s\n", W, server, export, V, nfs_get_error(nfs));
        return 1;
    }
    int fatal = 0;

    /* 1. tree */
    for (int d = 0; d < NDIRS; d++)
        fatal |= res(OP_MKDIR, nfs_mkdir2(nfs, DIRS[d], 0755)) < 0;
    /* 2. every procedure once */
    fatal |= coverage() < 0;
    /* 3. files, written then read back */
    for (int i = 0; i < NF && now() < deadline; i++) {
        F[i].alive = write_file(&F[i]) == 0;
        fatal |= !F[i].alive;
    }
    double t_write = now();
    for (int i = 0; i < NF && now() < deadline; i++)
        if (F[i].alive)
            fatal |= read_verify(&F[i]) < 0;
    double t_read = now();

    /* 4. paced random operations */
    uint64_t s = mix(SEED, 77 + W);
    double next = now();
    long iter;
    for (iter = 0; iter < nops && now() < deadline - 2; iter++) {
        next += 1.0 / rate;
        double d = next - now();
        if (d > 0)
            usleep((useconds_t)(d * 1e6));
        churn_op(&s, iter);
    }
    double t_churn = now();

    /* 5. delete about a quarter of the files, list what is left */
    for (int i = 0; i < NF; i++) {
        uint64_t ds = mix(SEED, 5000 + F[i].key);
        if (F[i].alive && i != 1 && rnd(&ds) % 4 == 0) {
            res(OP_UNLINK, nfs_unlink(nfs, F[i].path));
            F[i].alive = 0;
        }
    }
    for (int d = 0; d < NDIRS; d++)
        list_dir(DIRS[d]);
    nfs_umount(nfs);                                          /* MOUNT UMNT */
    nfs_destroy_context(nfs);

    printf("w%d v%d files=%d random=%llu zeros=%llu write_s=%.1f read_s=%.1f churn_s=%.1f ops=%ld total_s=%.1f%s\n",
           W, V, NF, (unsigned long long)tot[0], (unsigned long long)tot[1], t_write - t0, t_read - t_write,
           t_churn - t_read, iter, now() - t0, fatal ? " FAILED" : "");
    for (int i = 0; i < OP_N; i++)
        if (ok[i] || bad[i])
            printf("  w%d %-9s ok=%-6ld fail=%-4ld%s%s\n", W, opname[i], ok[i], bad[i], bad[i] ? " last: " : "",
                   bad[i] ? lasterr[i] : "");
    return fatal ? 1 : 0;
}
