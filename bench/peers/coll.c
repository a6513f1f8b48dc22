/*
 * coll.c: the C "peer twin" of Weft's collectives suite (bench/coll): the same
 * flags, the same tests, the same result lines, so that weft bench sets each
 * of Weft's figures beside MPICH's and Open MPI's from the same run.
 *
 *   mpicc.mpich   -O2 -o coll.mpich   bench/peers/coll.c
 *   mpicc.openmpi -O2 -o coll.openmpi bench/peers/coll.c
 *
 * MPI C API only, C99. Flags (Go's flag syntax: -name value, -name=value,
 * --name value), as in bench/coll:
 *
 *   -op NAME      barrier, bcast, reduce, allreduce, gather, gatherv, scatter,
 *                 scatterv, allgather, allgatherv, alltoall, alltoallv,
 *                 reduce_scatter_block, scan, exscan (default barrier)
 *   -size BYTES   one rank's buffer, or one block of the data movers (default 8;
 *                 reductions sum doubles: a positive multiple of 8; not for barrier)
 *   -root P       same (rank 0), rotate (rank i mod N at call i) or combo (each
 *                 root 4 calls in a row), for rooted collectives (default same)
 *   -procs B      the layout's procs, a label printed as procs= (default 1)
 *   -iters N      timed calls (default 0: calibrate rounds to last -time seconds)
 *   -time S       least timed seconds when calibrating (default 0.2)
 *
 * Each round starts with MPI_Barrier; every rank times its calls with MPI_Wtime,
 * and the slowest rank's time (MPI_MAX) decides the next round and is reported.
 * The first round (a tenth of -iters, or one call) is a warm-up. Every call's
 * result is checked at its ends. Rank 0 prints one line, impl= naming the MPI
 * it was built with, for example
 *   bench=coll impl=mpich op=bcast ranks=4 procs=1 root=same size=8 metric=time value=0.4 unit=us
 * Errors go to stderr and end the job with a non-zero status.
 */
#include "twin.h"

#define COMBO_RUN 4
#define GROW_CAP 100

static const char *opt_op = "barrier";
static const char *opt_root = "same";
static long opt_size = 8;
static int size_given;
static long opt_procs = 1;
static long opt_iters;
static double opt_time = 0.2;

static int me, nranks;
static long m; /* elements per buffer or block */
static char *sendb, *recvb;
static double *sendd, *recvd;
static int *counts, *displs;

/* bad_flag reports a command-line error before MPI starts. */
static void bad_flag(const char *why, const char *name, const char *val)
{
    char msg[256];
    snprintf(msg, sizeof msg, "-%s %s: %s", name, val, why);
    usage_exit(msg);
}

/* ---- checks (as bench/coll/ops.go) -------------------------------------- */

static unsigned char mark(long j) { return (unsigned char)(j % 255 + 1); }

static double tri(long k) { return (double)(k * (k + 1) / 2); }

static void wrong(long at, double got, double want)
{
    char msg[160];
    snprintf(msg, sizeof msg, "%s: element %ld is %g, want %g", opt_op, at, got, want);
    die(msg);
}

static void clear_blocks(char *buf, long n)
{
    for (long j = 0; j < n; j++)
        buf[j * m] = buf[j * m + m - 1] = 0;
}

/* check_blocks checks that block j of the n blocks of buf starts and ends with
 * mark(j * stride + base). */
static void check_blocks(const char *buf, long n, long stride, long base)
{
    for (long j = 0; j < n; j++) {
        unsigned char w = mark(j * stride + base);
        long at[2] = {j * m, j * m + m - 1};
        for (int k = 0; k < 2; k++)
            if ((unsigned char)buf[at[k]] != w)
                wrong(at[k], (unsigned char)buf[at[k]], w);
    }
}

static void clear_ends(void) { recvd[0] = recvd[m - 1] = 0; }

static void check_ends(double want)
{
    if (recvd[0] != want)
        wrong(0, recvd[0], want);
    if (recvd[m - 1] != want)
        wrong(m - 1, recvd[m - 1], want);
}

/* ---- buffers ------------------------------------------------------------ */

static void *xmalloc(size_t n)
{
    void *p = calloc(n ? n : 1, 1);
    if (!p)
        die("out of memory");
    return p;
}

/* setup allocates what op needs, filled as in bench/coll/ops.go. */
static void setup(int reduces)
{
    long n = nranks;
    if (reduces) {
        long in = strcmp(opt_op, "reduce_scatter_block") == 0 ? n * m : m;
        sendd = xmalloc((size_t)in * sizeof(double));
        recvd = xmalloc((size_t)m * sizeof(double));
        for (long k = 0; k < in; k++)
            sendd[k] = me + 1;
        return;
    }
    sendb = xmalloc((size_t)(n * m));
    recvb = xmalloc((size_t)(n * m));
    counts = xmalloc((size_t)n * sizeof(int));
    displs = xmalloc((size_t)n * sizeof(int));
    for (long j = 0; j < n; j++) {
        counts[j] = (int)m;
        displs[j] = (int)(j * m);
        /* one block: our mark (gather, allgather); n blocks: block j is
         * mark(j) (scatter) or mark(me*n+j) (alltoall) */
        long v = strncmp(opt_op, "scatter", 7) == 0 ? j : strncmp(opt_op, "alltoall", 8) == 0 ? me * n + j : me;
        memset(sendb + j * m, mark(v), (size_t)m);
    }
}

/* ---- one call ----------------------------------------------------------- */

static void run(long i, int root)
{
    long n = nranks;
    const char *op = opt_op;
    MPI_Comm w = MPI_COMM_WORLD;
    if (strcmp(op, "barrier") == 0) {
        check(MPI_Barrier(w), "MPI_Barrier");
    } else if (strcmp(op, "bcast") == 0) {
        if (me == root)
            recvb[0] = recvb[m - 1] = (char)mark(i);
        check(MPI_Bcast(recvb, (int)m, MPI_BYTE, root, w), "MPI_Bcast");
        check_blocks(recvb, 1, 0, i);
    } else if (strcmp(op, "reduce") == 0) {
        clear_ends();
        check(MPI_Reduce(sendd, recvd, (int)m, MPI_DOUBLE, MPI_SUM, root, w), "MPI_Reduce");
        if (me == root)
            check_ends(tri(n));
    } else if (strcmp(op, "allreduce") == 0) {
        clear_ends();
        check(MPI_Allreduce(sendd, recvd, (int)m, MPI_DOUBLE, MPI_SUM, w), "MPI_Allreduce");
        check_ends(tri(n));
    } else if (strcmp(op, "reduce_scatter_block") == 0) {
        clear_ends();
        check(MPI_Reduce_scatter_block(sendd, recvd, (int)m, MPI_DOUBLE, MPI_SUM, w),
              "MPI_Reduce_scatter_block");
        check_ends(tri(n));
    } else if (strcmp(op, "scan") == 0) {
        clear_ends();
        check(MPI_Scan(sendd, recvd, (int)m, MPI_DOUBLE, MPI_SUM, w), "MPI_Scan");
        check_ends(tri(me + 1));
    } else if (strcmp(op, "exscan") == 0) {
        clear_ends();
        check(MPI_Exscan(sendd, recvd, (int)m, MPI_DOUBLE, MPI_SUM, w), "MPI_Exscan");
        if (me > 0)
            check_ends(tri(me));
    } else if (strcmp(op, "gather") == 0 || strcmp(op, "gatherv") == 0) {
        clear_blocks(recvb, n);
        if (op[6] == 'v')
            check(MPI_Gatherv(sendb, (int)m, MPI_BYTE, recvb, counts, displs, MPI_BYTE, root, w),
                  "MPI_Gatherv");
        else
            check(MPI_Gather(sendb, (int)m, MPI_BYTE, recvb, (int)m, MPI_BYTE, root, w), "MPI_Gather");
        if (me == root)
            check_blocks(recvb, n, 1, 0);
    } else if (strcmp(op, "scatter") == 0 || strcmp(op, "scatterv") == 0) {
        clear_blocks(recvb, 1);
        if (op[7] == 'v')
            check(MPI_Scatterv(sendb, counts, displs, MPI_BYTE, recvb, (int)m, MPI_BYTE, root, w),
                  "MPI_Scatterv");
        else
            check(MPI_Scatter(sendb, (int)m, MPI_BYTE, recvb, (int)m, MPI_BYTE, root, w), "MPI_Scatter");
        check_blocks(recvb, 1, 0, me);
    } else if (strcmp(op, "allgather") == 0 || strcmp(op, "allgatherv") == 0) {
        clear_blocks(recvb, n);
        if (op[9] == 'v')
            check(MPI_Allgatherv(sendb, (int)m, MPI_BYTE, recvb, counts, displs, MPI_BYTE, w),
                  "MPI_Allgatherv");
        else
            check(MPI_Allgather(sendb, (int)m, MPI_BYTE, recvb, (int)m, MPI_BYTE, w), "MPI_Allgather");
        check_blocks(recvb, n, 1, 0);
    } else { /* alltoall, alltoallv */
        clear_blocks(recvb, n);
        if (op[8] == 'v')
            check(MPI_Alltoallv(sendb, counts, displs, MPI_BYTE, recvb, counts, displs, MPI_BYTE, w),
                  "MPI_Alltoallv");
        else
            check(MPI_Alltoall(sendb, (int)m, MPI_BYTE, recvb, (int)m, MPI_BYTE, w), "MPI_Alltoall");
        check_blocks(recvb, n, n, me);
    }
}

static int root_of(long i)
{
    if (strcmp(opt_root, "rotate") == 0)
        return (int)(i % nranks);
    if (strcmp(opt_root, "combo") == 0)
        return (int)(i / COMBO_RUN % nranks);
    return 0;
}

/* measure returns the slowest rank's seconds per call in the last round, the
 * rounds chosen as in bench/coll/body.go. */
static double measure(void)
{
    long n = opt_iters / 10 > 1 ? opt_iters / 10 : 1, i = 0;
    for (int round = 0;; round++) {
        check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
        double start = MPI_Wtime();
        for (long k = 0; k < n; k++, i++)
            run(i, root_of(i));
        double took = MPI_Wtime() - start;
        check(MPI_Allreduce(MPI_IN_PLACE, &took, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD),
              "MPI_Allreduce");
        if (round > 0 && (opt_iters > 0 || took >= opt_time))
            return took / (double)n;
        if (opt_iters > 0) {
            n = opt_iters;
        } else { /* aim 20% past -time; a round too short to measure grows by GROW_CAP */
            double want = (double)n * opt_time / took * 1.2;
            n = (long)(want < (double)(n * GROW_CAP) ? want : (double)(n * GROW_CAP)) + 1;
        }
    }
}

/* ---- flags -------------------------------------------------------------- */

static const char *const ops[] = {"barrier",  "bcast",      "reduce",   "allreduce",
                                  "gather",   "gatherv",    "scatter",  "scatterv",
                                  "allgather", "allgatherv", "alltoall", "alltoallv",
                                  "reduce_scatter_block", "scan", "exscan"};

static void parse_args(int argc, char **argv)
{
    twin_name = "coll";
    twin_usage = "[-op NAME] [-size BYTES] [-root same|rotate|combo] [-procs B] [-iters N] [-time S]";
    const struct twin_flag flags[] = {
        {"op", &opt_op, NULL, NULL, 0, NULL},
        {"root", &opt_root, NULL, NULL, 0, NULL},
        {"size", NULL, &opt_size, NULL, 0, &size_given},
        {"procs", NULL, &opt_procs, NULL, 1, NULL},
        {"iters", NULL, &opt_iters, NULL, 0, NULL},
        {"time", NULL, NULL, &opt_time, 0, NULL},
    };
    twin_parse(argc, argv, flags, sizeof flags / sizeof flags[0]);
}

static int validate(int *rooted)
{
    int known = 0;
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++)
        known |= strcmp(opt_op, ops[k]) == 0;
    if (!known)
        bad_flag("not a collective of this suite", "op", opt_op);
    int reduces = strstr(opt_op, "reduce") != NULL || strstr(opt_op, "scan") != NULL;
    *rooted = strcmp(opt_op, "bcast") == 0 || strcmp(opt_op, "reduce") == 0 ||
              strncmp(opt_op, "gather", 6) == 0 || strncmp(opt_op, "scatter", 7) == 0;
    char sz[32], procs[32], iters[32], secs[32];
    snprintf(sz, sizeof sz, "%ld", opt_size);
    snprintf(procs, sizeof procs, "%ld", opt_procs);
    snprintf(iters, sizeof iters, "%ld", opt_iters);
    snprintf(secs, sizeof secs, "%g", opt_time);
    if (strcmp(opt_root, "same") != 0 && strcmp(opt_root, "rotate") != 0 && strcmp(opt_root, "combo") != 0)
        bad_flag("want same, rotate or combo", "root", opt_root);
    if (!*rooted && strcmp(opt_root, "same") != 0)
        bad_flag("this collective has no root", "root", opt_root);
    if (strcmp(opt_op, "barrier") == 0) {
        if (size_given)
            bad_flag("barrier moves no data", "size", sz);
        opt_size = 0;
    } else if (reduces && (opt_size < 8 || opt_size % 8 != 0)) {
        bad_flag("reductions sum doubles, want a positive multiple of 8 bytes", "size", sz);
    } else if (opt_size < 1 || opt_size > (1L << 24)) {
        bad_flag("want 1 to 16777216 bytes", "size", sz);
    }
    if (opt_procs < 1)
        bad_flag("want at least 1", "procs", procs);
    if (opt_iters < 0)
        bad_flag("want 0 (calibrate) or more", "iters", iters);
    if (opt_iters == 0 && !(opt_time > 0))
        bad_flag("want a positive number of seconds", "time", secs);
    return reduces;
}

int main(int argc, char **argv)
{
    parse_args(argc, argv);
    int rooted;
    int reduces = validate(&rooted);
    check(MPI_Init(&argc, &argv), "MPI_Init");
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    twin_rank = me;
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (nranks % opt_procs != 0)
        die("-procs does not divide the job's ranks");
    m = reduces ? opt_size / 8 : opt_size;
    if (m > 0)
        setup(reduces);
    double per = measure();
    if (me == 0) {
        printf("bench=coll impl=%s op=%s ranks=%d procs=%ld root=%s size=%ld metric=time value=%.6g unit=us\n",
               IMPL, opt_op, nranks, opt_procs, rooted ? opt_root : "none", opt_size, per * 1e6);
        fflush(stdout);
    }
    MPI_Finalize();
    return 0;
}
